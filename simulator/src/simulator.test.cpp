// The simulator on small plans: pipeline timing, memory, bad plans, closed form against the
// event simulation, traces, options and a measured GH200 plan.
#include "sailor/simulator/simulator.hpp"

#include <cmath>
#include <random>

#include <doctest/doctest.h>
#include "sailor/config/sailor_format.hpp"
#include <nlohmann/json.hpp>

#include "test_fixtures.hpp"

using namespace sailor;
using namespace sailor::simulator;
using namespace sailor::simulator::testing;

TEST_CASE_FIXTURE(with_context, "one stage, one replica: m x (fwd + bwd) + optimizer step") {
  auto plan = make_plan(1, 4, {{4, {rep("fast", "a")}}});
  auto e = simulate(ctx, plan);
  REQUIRE(e.ok());
  // 4 micro-batches of 4 layers x (1 + 2) ms = 48 ms, then the step: params x 36 B at half of 1 TB/s.
  const double params = double(model.total_params());
  const double update = params * 36 / (1000e9 * 0.5);
  CHECK(e->stages[0].update_s == doctest::Approx(update).epsilon(1e-6));
  CHECK(e->iteration_time_s == doctest::Approx(0.048 + update).epsilon(1e-9));
  CHECK(e->stages[0].allreduce_s == 0);
  auto ev = simulate_events(ctx, plan);
  REQUIRE(ev.ok());
  CHECK(ev->iteration_time_s == doctest::Approx(e->iteration_time_s).epsilon(1e-9));
  // cost: one GPU at $2/h for the iteration, no egress
  CHECK(e->cost_per_iteration_usd == doctest::Approx(2.0 * e->iteration_time_s / 3600).epsilon(1e-9));
  CHECK(e->throughput_iters_per_s == doctest::Approx(1 / e->iteration_time_s));
  CHECK(e->tokens_per_s == doctest::Approx(4 * 128 / e->iteration_time_s));
}

TEST_CASE("two stages across zones: 1F1B with a known transfer") {
  fixture f;
  sim_options o;
  o.p2p_latency_s = 0;
  auto ctx = f.make(o);
  auto plan = make_plan(1, 8, {{2, {rep("fast", "a")}}, {2, {rep("fast", "b")}}});
  auto e = simulate(ctx, plan);
  REQUIRE(e.ok());
  // activation: 128 x 64 x 2 bytes over 1 GB/s after 1 ms
  const double x = 1e-3 + 128.0 * 64 * 2 / 1e9;
  CHECK(e->stages[0].send_forward_s == doctest::Approx(x));
  CHECK(e->stages[1].send_backward_s == doctest::Approx(x));
  // Each stage: f = 2 ms, b = 4 ms. Blocking sends and receives hold both streams:
  // round trip = 2 x 6 ms + 2x, period = 6 ms + 2x (a send and a receive per micro-batch).
  const double period = 6e-3 + 2 * x, round_trip = 12e-3 + 2 * x;
  CHECK(e->pipeline_s == doctest::Approx(round_trip + 7 * period).epsilon(1e-9));
  auto ev = simulate_events(ctx, plan);
  REQUIRE(ev.ok());
  CHECK(ev->pipeline_s == doctest::Approx(e->pipeline_s).epsilon(1e-6));
  CHECK(ev->iteration_time_s == doctest::Approx(e->iteration_time_s).epsilon(1e-6));
  // egress: 8 micro-batches, an activation forward and a gradient back, both priced at $0.02/GB
  CHECK(e->egress_usd_per_iteration == doctest::Approx(8 * 2 * 128.0 * 64 * 2 / 1e9 * 0.02).epsilon(1e-9));

  // With sends that overlap compute the period is the compute alone.
  sim_options async = o;
  async.overlap_p2p = true;
  auto actx = f.make(async);
  auto ae = simulate(actx, plan);
  REQUIRE(ae.ok());
  // Only S - s micro-batches may be in flight: stage 0's period is at least the loop through
  // both stages (12 ms of compute and two transfers) over 2, and its warm-up forward hides
  // 2 ms of the first round trip.
  CHECK(ae->pipeline_s == doctest::Approx(6e-3 + 7 * (12e-3 + 2 * x) / 2 + (6e-3 + 2 * x - 2e-3)).epsilon(1e-9));
  CHECK(ae->pipeline_s < e->pipeline_s);
  auto aev = simulate_events(actx, plan);
  REQUIRE(aev.ok());
  CHECK(aev->pipeline_s == doctest::Approx(ae->pipeline_s).epsilon(0.02));
}

TEST_CASE_FIXTURE(with_context, "a straggler replica sets its stage's pace, data-parallel sync is charged") {
  auto even = make_plan(1, 8, {{4, {rep("fast", "a"), rep("fast", "a")}}});
  auto mixed = make_plan(1, 8, {{4, {rep("fast", "a"), rep("slow", "a")}}});
  auto e1 = simulate(ctx, even);
  auto e2 = simulate(ctx, mixed);
  REQUIRE(e1.ok());
  REQUIRE(e2.ok());
  CHECK(e1->stages[0].forward_s == doctest::Approx(4e-3));
  CHECK(e2->stages[0].forward_s == doctest::Approx(8e-3));
  CHECK(e2->stages[0].backward_s == doctest::Approx(16e-3));
  CHECK(e2->stages[0].slowest_replica == 1);
  CHECK(e2->stages[0].micro_batches == 4);  // 8 sequences over 2 replicas of micro-batch 1
  CHECK(e1->stages[0].allreduce_s > 0);
  // ring of two inside the zone (100 GB/s, but each node's NIC gives 10 GB/s):
  // 2 x 1/2 x params x 4 B / 10 GB/s + per-step latency
  const double params = double(model.total_params());
  const double buckets = std::ceil(params * 4 / 25e6);
  CHECK(e1->stages[0].allreduce_s ==
        doctest::Approx(params * 4 / 10e9 + buckets * 2 * ctx.options().collective_latency_s).epsilon(1e-6));
  CHECK(e2->iteration_time_s - e1->iteration_time_s == doctest::Approx(4 * 12e-3).epsilon(1e-6));
  // cost: $2/h + $1/h
  CHECK(e2->gpu_usd_per_hour == doctest::Approx(3.0));
}

TEST_CASE("memory: Korthikanti activations, mixed-precision Adam states, 1F1B in-flight counts") {
  fixture f;
  f.profile.sizes_by_tp.clear();  // no llm_info: the formulas
  auto ctx = f.make();
  const double s = 128, h = 64, a = 4, b = 2;
  // one block, no TP, one micro-batch of 2 in flight: s*b*h*(34 + 5*a*s/h)
  auto m1 = ctx.stage_memory(0, 1, 2, 1, 2, 1, false);
  CHECK(m1.activations == doctest::Approx(s * b * h * (34 + 5 * a * s / h)));
  // TP 2 (no sequence parallelism): s*b*h*(10 + 24/t + 5*a*s/(h*t))
  auto m2 = ctx.stage_memory(0, 2, 2, 1, 2, 1, false);
  CHECK(m2.activations == doctest::Approx(s * b * h * (10 + 24.0 / 2 + 5 * a * s / (h * 2))));
  // Full recomputation keeps each micro-batch's stage input (2sbh bytes) plus one layer rebuilt.
  auto m3 = ctx.stage_memory(0, 1, 2, 1, 2, 3, true);
  CHECK(m3.activations == doctest::Approx(3 * 2 * s * b * h + s * b * h * (34 + 5 * a * s / h)));
  const double p = double(f.model.params_of_block());
  CHECK(m1.parameters == doctest::Approx(2 * p));
  CHECK(m1.gradients == doctest::Approx(6 * p));
  CHECK(m1.optimizer_states == doctest::Approx(12 * p));
  CHECK(ctx.stage_memory(0, 2, 2, 1, 2, 1, false).parameters == doctest::Approx(p));

  // In a 2-stage pipeline stage 0 holds 2 micro-batches, stage 1 one.
  auto plan = make_plan(1, 8, {{2, {rep("fast", "a")}}, {2, {rep("fast", "b")}}});
  plan.stages[0].first_layer = 0;
  auto e = simulate(ctx, plan);
  REQUIRE(e.ok());
  auto block_act = s * 1 * h * (34 + 5 * a * s / h);
  auto emb_act = s * h * 2;
  CHECK(e->memory[0].bytes.activations == doctest::Approx(2 * (emb_act + block_act)));
  CHECK(e->memory[1].bytes.activations == doctest::Approx(1 * (block_act + (s * 1000 * 6 + s * h * 2))));
  CHECK(e->peak_memory_bytes == doctest::Approx(std::max(e->memory[0].bytes.total(), e->memory[1].bytes.total())));
}

TEST_CASE("a plan that does not fit memory is a result naming the GPU and the excess") {
  fixture f;
  f.cluster.gpus = config::gpu_catalog({spec("fast", 0.001, 2.0), spec("slow", 10, 1.0)});
  auto ctx = f.make();
  auto e = simulate(ctx, make_plan(1, 4, {{4, {rep("fast", "a")}}}));
  REQUIRE(e.ok());
  CHECK_FALSE(e->fits_memory);
  CHECK(e->memory_verdict.find("fast") != std::string::npos);
  CHECK(e->memory_verdict.find("over by") != std::string::npos);
  auto r = resolve(ctx, make_plan(1, 4, {{4, {rep("fast", "a")}}}));
  REQUIRE(r.ok());
  CHECK(closed_form(ctx, *r).worst_memory_headroom_bytes < 0);
}

TEST_CASE_FIXTURE(with_context, "bad plans: layer coverage, unknown GPU type, unknown zone, missing link") {
  auto gap = make_plan(1, 4, {{2, {rep("fast", "a")}}, {1, {rep("fast", "a")}}});
  auto e = simulate(ctx, gap);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("exactly once") != std::string::npos);
  auto overlap = make_plan(1, 4, {{2, {rep("fast", "a")}}, {2, {rep("fast", "a")}}});
  overlap.stages[1].first_layer = 1;
  CHECK_FALSE(simulate(ctx, overlap).ok());
  auto gpu = simulate(ctx, make_plan(1, 4, {{4, {rep("TPU-v9", "a")}}}));
  REQUIRE_FALSE(gpu.ok());
  CHECK(gpu.error().message.find("TPU-v9") != std::string::npos);
  CHECK(gpu.error().field == "stages[0].replicas[0].gpu_type");
  auto zone = simulate(ctx, make_plan(1, 4, {{4, {rep("fast", "mars-1")}}}));
  REQUIRE_FALSE(zone.ok());
  CHECK(zone.error().message.find("mars-1") != std::string::npos);

  // Sailor's fits: a zone pair with no fit has no link.
  config::sailor_network net;
  config::sailor_bandwidth_fit fit{0, 0, 10, 20};
  net.fits[{{"a", "fast", 1}, {"a", "fast", 1}}] = fit;
  net.egress_usd_per_gb[{"b", "b"}] = 0;
  sim_inputs in;
  in.model = model;
  in.profile = &profile;
  in.gpus = cluster.gpus;
  in.network = &net;
  auto sctx = sim_context::make(in);
  REQUIRE(sctx.ok());
  auto nolink = simulate(*sctx, make_plan(1, 4, {{2, {rep("fast", "a")}}, {2, {rep("fast", "b")}}}));
  REQUIRE_FALSE(nolink.ok());
  CHECK(nolink.error().message.find("no link") != std::string::npos);
  CHECK(simulate(*sctx, make_plan(1, 4, {{2, {rep("fast", "a")}}, {2, {rep("fast", "a")}}})).ok());
}

TEST_CASE("a GPU type without a profile uses the catalog's analytic model, and says so") {
  fixture f;
  f.cluster.gpus.upsert(spec("other", 10, 1.0));
  f.cluster.zones[0].gpus["other"] = 4;
  auto ctx = f.make();
  auto e = simulate(ctx, make_plan(1, 4, {{4, {rep("other", "a")}}}));
  REQUIRE(e.ok());
  CHECK(e->stages[0].analytic);
  REQUIRE_FALSE(e->notes.empty());
  CHECK(e->notes[0].find("other") != std::string::npos);
  // forward of a block: its FLOPs over the efficiency times 100 TFLOP/s
  auto c = ctx.compute(ctx.gpu_id("other"), 1, 1, 1, 2);
  CHECK(c.forward_s == doctest::Approx(f.model.forward_flops_of_layer(1, 1) / (100e12 * ctx.options().analytic_efficiency)));
  CHECK(c.backward_s == doctest::Approx(2 * c.forward_s));
}

TEST_CASE("closed form vs event simulation on random plans") {
  fixture f;
  f.set_blocks(30);
  std::mt19937 rng(7);
  double worst_balanced = 0, worst = 0;
  f.with_and_without_overlap([&](const sim_context& ctx, bool async) {
    for (int trial = 0; trial < 60; ++trial) {
      const int S = 1 + int(rng() % 6);
      const bool balanced = trial % 2 == 0;
      std::vector<int> cuts;
      int left = 32;
      for (int s = 0; s < S; ++s) {
        int n = s == S - 1 ? left : balanced ? 32 / S : 1 + int(rng() % std::max(1, left - (S - s - 1)));
        n = std::min(n, left - (S - s - 1));
        cuts.push_back(n);
        left -= n;
      }
      std::vector<std::pair<int, std::vector<config::replica>>> stages;
      const int dp = 1 + int(rng() % 3);
      for (int s = 0; s < S; ++s) {
        std::vector<config::replica> reps;
        for (int r = 0; r < dp; ++r)
          reps.push_back(rep(rng() % 4 == 0 ? "slow" : "fast", rng() % 3 == 0 ? "b" : "a"));
        stages.push_back({cuts[s], reps});
      }
      const int mbs = 1 + int(rng() % 2);
      auto plan = make_plan(mbs, mbs * dp * (S + int(rng() % 12)), stages);
      auto e = simulate(ctx, plan);
      auto ev = simulate_events(ctx, plan);
      REQUIRE(e.ok());
      REQUIRE(ev.ok());
      const double diff = std::abs(e->iteration_time_s - ev->iteration_time_s) / ev->iteration_time_s;
      if (diff > 0.03) {
        std::string d = "S=" + std::to_string(S) + " dp=" + std::to_string(dp) + " mbs=" + std::to_string(mbs) +
                        " gbs=" + std::to_string(plan.global_batch) + " async=" + std::to_string(async) + " layers:";
        for (int c : cuts) d += " " + std::to_string(c);
        for (const auto& st : e->stages) d += " | f=" + std::to_string(st.forward_s * 1e3) + " b=" + std::to_string(st.backward_s * 1e3) + " sf=" + std::to_string(st.send_forward_s * 1e3) + " sb=" + std::to_string(st.send_backward_s * 1e3) + " ar=" + std::to_string(st.allreduce_s * 1e3);
        MESSAGE(d << " cf=" << e->iteration_time_s << " ev=" << ev->iteration_time_s);
      }
      worst = std::max(worst, diff);
      if (balanced) worst_balanced = std::max(worst_balanced, diff);
      // The closed form never undercuts the schedule's critical path by much.
      CHECK(e->iteration_time_s >= 0.9 * ev->iteration_time_s);
    }
  });
  MESSAGE("closed form vs events: worst " << worst * 100 << "%, balanced splits " << worst_balanced * 100 << "%");
  CHECK(worst < 0.05);
}

TEST_CASE_FIXTURE(with_context, "the event simulation's Chrome trace holds every forward and backward") {
  auto plan = make_plan(1, 6, {{2, {rep("fast", "a")}}, {2, {rep("fast", "b")}}});
  auto ev = simulate_events(ctx, plan);
  REQUIRE(ev.ok());
  auto j = nlohmann::json::parse(to_chrome_trace(*ev));
  int forwards = 0, backwards = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string n = e["name"];
    if (n[0] == 'F') ++forwards;
    if (n[0] == 'B') ++backwards;
    CHECK(e["dur"].get<double>() >= 0);
  }
  CHECK(forwards == 12);  // 6 micro-batches x 2 stages
  CHECK(backwards == 12);
}

TEST_CASE("options by name") {
  sim_options o;
  CHECK_FALSE(set_options(o, "p2p_latency_s=0.001,overlap_p2p=1").has_value());
  CHECK(o.p2p_latency_s == 0.001);
  CHECK(o.overlap_p2p);
  auto err = set_options(o, "no_such=1");
  REQUIRE(err.has_value());
  CHECK(err->field == "no_such");
  CHECK(set_options(o, "p2p_latency_s=abc").has_value());
  CHECK(describe(o).find("p2p_latency_s=0.001") != std::string::npos);
}

TEST_CASE("Sailor's data end to end: a measured GH200 plan is predicted closely") {
  const std::string root = std::string(SAILOR_DATA_DIR) + "/sailor";
  auto d = config::load_sailor_data(root, "OPT-350");
  REQUIRE(d.ok());
  auto pf = config::load_sailor_plan(root + "/sailor/Planner/simulations/validation/clariden/OPT-350/N16/plan_config_N16_D8.json");
  REQUIRE(pf.ok());
  sim_inputs in;
  in.model = d->model;
  in.profile = &d->profile;
  in.gpus = d->gpus;
  in.network = &d->network;
  auto ctx = sim_context::make(in);
  REQUIRE(ctx.ok());
  auto e = simulate(*ctx, pf->value);
  REQUIRE(e.ok());
  // Loose bounds (the bench reports the real accuracy): catch unit and wiring errors.
  CHECK(e->iteration_time_s == doctest::Approx(pf->measured_iteration_s).epsilon(0.15));
  CHECK(e->peak_memory_bytes == doctest::Approx(pf->measured_peak_memory_bytes).epsilon(0.15));
  CHECK(e->stages.size() == 2);
  CHECK(e->stages[0].micro_batches == 16);  // 1024 / (8 x 8)
  CHECK_FALSE(e->stages[0].analytic);
  CHECK(e->gpu_usd_per_hour == doctest::Approx(64 * 11.06));
  auto ev = simulate_events(*ctx, pf->value);
  REQUIRE(ev.ok());
  CHECK(ev->iteration_time_s == doctest::Approx(e->iteration_time_s).epsilon(0.02));
}
