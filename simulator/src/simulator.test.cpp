#include "sailor/simulator/simulator.hpp"

#include <cmath>
#include <random>

#include <doctest/doctest.h>
#include "sailor/config/sailor_format.hpp"
#include <nlohmann/json.hpp>

using namespace sailor;
using namespace sailor::simulator;

namespace {

// A small model: 2 blocks (4 layers), sequence 128, hidden 64, 4 heads, vocabulary 1000.
config::model_shape tiny_model() {
  config::model_shape m;
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.sequence = 128;
  m.vocabulary = 1000;
  return m;
}

// GPU "fast": 1 ms forward and 2 ms backward per layer at mbs 1 and 2 (tp 1); "slow": twice that.
config::model_profile tiny_profile() {
  config::model_profile p;
  p.model = "tiny";
  for (auto [name, factor] : {std::pair<const char*, double>{"fast", 1.0}, {"slow", 2.0}}) {
    config::gpu_profile g;
    g.gpu_type = name;
    for (int mbs : {1, 2})
      g.times[mbs][1] = std::vector<config::layer_time>(4, config::layer_time{1e-3 * factor * mbs, 2e-3 * factor * mbs, 0});
    p.by_gpu[name] = g;
  }
  return p;
}

config::gpu_spec spec(const char* name, double mem_gb, double price) {
  config::gpu_spec s;
  s.name = name;
  s.peak_fp16_tflops = 100;
  s.memory_bytes = static_cast<std::uint64_t>(mem_gb * 1e9);
  s.memory_bandwidth_gbytes_per_s = 1000;
  s.gpus_per_node = 4;
  s.intra_node_gbytes_per_s = 100;
  s.inter_node_gbytes_per_s = 10;
  s.on_demand_usd_per_hour = price;
  return s;
}

// Two zones in two regions: a link of 1 ms and 1 GB/s, egress $0.02/GB.
config::cluster two_zones() {
  config::cluster c;
  c.name = "test";
  c.gpus = config::gpu_catalog({spec("fast", 10, 2.0), spec("slow", 10, 1.0)});
  c.regions = {{"r1", {"a"}}, {"r2", {"b"}}};
  c.zones = {{"a", "r1", {{"fast", 8}, {"slow", 8}}}, {"b", "r2", {{"fast", 8}}}};
  c.links.push_back({"a", "b", 1e-3, 1.0, std::nullopt, 0.02});
  c.defaults.same_zone = {"", "", 0.0, 100.0, std::nullopt, 0.0};
  return c;
}

struct fixture {
  config::model_shape model = tiny_model();
  config::model_profile profile = tiny_profile();
  config::cluster cluster = two_zones();
  sim_context make(sim_options o = {}) {
    o.profile_layer_overhead_s = 0;
    o.framework_overhead_bytes = 0;
    o.activation_peak_factor = 1.0;
    sim_inputs in;
    in.model = model;
    in.profile = &profile;
    in.cluster = &cluster;
    in.job.optimizer = config::optimizer_kind::adam;
    in.job.mixed_precision = true;
    auto c = sim_context::make(in, o);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().to_string()));
    return std::move(*c);
  }
};

config::replica rep(const char* gpu, const char* zone, int tp = 1) {
  config::replica r;
  r.gpu_type = gpu;
  r.zone = zone;
  r.tp = tp;
  return r;
}

config::plan make_plan(int mbs, int gbs, std::vector<std::pair<int, std::vector<config::replica>>> stages) {
  config::plan p;
  p.micro_batch = mbs;
  p.global_batch = gbs;
  int first = 0;
  for (auto& [n, reps] : stages) {
    config::stage_plan s;
    s.first_layer = first;
    s.num_layers = n;
    s.replicas = reps;
    first += n;
    p.stages.push_back(s);
  }
  return p;
}

}  // namespace

TEST_CASE("one stage, one replica: m x (fwd + bwd) + optimizer step") {
  fixture f;
  auto ctx = f.make();
  auto plan = make_plan(1, 4, {{4, {rep("fast", "a")}}});
  auto e = simulate(ctx, plan);
  REQUIRE(e.ok());
  // 4 micro-batches of 4 layers x (1 + 2) ms = 48 ms, then the step: params x 36 B at half of 1 TB/s.
  const double params = double(f.model.total_params());
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

TEST_CASE("a straggler replica sets its stage's pace, data-parallel sync is charged") {
  fixture f;
  auto ctx = f.make();
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
  const double params = double(f.model.total_params());
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

TEST_CASE("bad plans: layer coverage, unknown GPU type, unknown zone, missing link") {
  fixture f;
  auto ctx = f.make();
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
  in.model = f.model;
  in.profile = &f.profile;
  in.gpus = f.cluster.gpus;
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
  f.model.num_layers = 30;
  for (auto& [name, g] : f.profile.by_gpu)
    for (auto& [mbs, by_tp] : g.times)
      for (auto& [tp, v] : by_tp) v.resize(32, v[1]);
  std::mt19937 rng(7);
  double worst_balanced = 0, worst = 0;
  for (bool async : {false, true}) {
    sim_options o;
    o.overlap_p2p = async;
    auto ctx = f.make(o);
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
  }
  MESSAGE("closed form vs events: worst " << worst * 100 << "%, balanced splits " << worst_balanced * 100 << "%");
  CHECK(worst < 0.05);
}

TEST_CASE("the event simulation's Chrome trace holds every forward and backward") {
  fixture f;
  auto ctx = f.make();
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

TEST_CASE("all-reduce: shard by shard across TP degrees, hierarchical across zones as the runtime runs it") {
  fixture f;
  auto ctx = f.make();
  const int fast = ctx.gpu_id("fast"), a = ctx.zone_id("a"), b = ctx.zone_id("b");
  const double params = 1e9;
  endpoint tp1{a, fast, 1}, tp2{a, fast, 2};
  endpoint two_tp1[] = {tp1, tp1};
  endpoint mixed[] = {tp1, tp2};
  endpoint two_tp2[] = {tp2, tp2};
  // The TP-1 replica's single GPU carries every shard: it sets the pace.
  CHECK(ctx.allreduce_s(mixed, 2, params) == doctest::Approx(ctx.allreduce_s(two_tp1, 2, params)));
  CHECK(ctx.allreduce_s(two_tp2, 2, params) < ctx.allreduce_s(mixed, 2, params));
  // Four replicas over two zones joined by a 1 GB/s link: hierarchical beats a flat ring, and
  // both are slower than four in one zone.
  endpoint spread[] = {tp1, tp1, {b, fast, 1}, {b, fast, 1}};
  endpoint local[] = {tp1, tp1, tp1, tp1};
  const double t_spread = ctx.allreduce_s(spread, 4, params);
  const double t_local = ctx.allreduce_s(local, 4, params);
  CHECK(t_spread > t_local);
  const double bytes = params * 4;
  const double flat_ring = 2.0 * 3 / 4 * bytes / 1e9;  // over the 1 GB/s cross-zone edge
  CHECK(t_spread < flat_ring);
  // Hierarchical (comm::make_hierarchical): (1) a 2-member ring reduce-scatter inside each
  // zone, 1/2 of the shard at the NIC's 10 GB/s, 1 step; (2) P = 2 shards, each
  // ring-all-reduced across the two zones by one member: 2x(1/2) of half the shard over the
  // 1 GB/s link (each of the 2 flows gets the link's 1 GB/s, under the NIC's 10/2), 2 steps
  // of 20 us plus the link's 1 ms; (3) one all-gather inside each zone, 1/2 of the shard, 1 step.
  // Each of the 160 buckets pays those latencies.
  const double lat = ctx.options().collective_latency_s;
  CHECK(t_spread == doctest::Approx(bytes / 2 / 10e9 + 160 * lat + bytes / 2 / 1e9 + 160 * 2 * (1e-3 + lat) +
                                    bytes / 2 / 10e9 + 160 * lat).epsilon(1e-6));
  // The flat ring (sim_options::hierarchical_allreduce = false, kept to compare): 2x(3/4) of
  // the shard over the slowest edge, the 1 GB/s link.
  sim_options ring_only;
  ring_only.hierarchical_allreduce = false;
  auto ring_ctx = f.make(ring_only);
  CHECK(ring_ctx.allreduce_s(spread, 4, params) ==
        doctest::Approx(flat_ring + 160 * 6 * (1e-3 + lat)).epsilon(1e-6));
  CHECK(ring_ctx.allreduce_s(local, 4, params) == doctest::Approx(t_local));
  // Egress: only phase 2 crosses, 2x(1/2) of the buffer from each zone to the other, against
  // 2x(3/4) per crossing edge for the ring.
  CHECK(ctx.allreduce_egress_usd(spread, 4, params) ==
        doctest::Approx(ring_ctx.allreduce_egress_usd(spread, 4, params) * (1.0 / 1.5)));
  CHECK(ctx.allreduce_egress_usd(spread, 4, params) > 0);
  CHECK(ctx.allreduce_egress_usd(local, 4, params) == 0);
}

TEST_CASE("a stage of hundreds of replicas: no cap, all-reduce grows, memory per GPU the same") {
  fixture f;
  f.cluster.zones[0].gpus["fast"] = 4096;
  f.cluster.zones[1].gpus["fast"] = 4096;
  auto ctx = f.make();
  auto plan_of = [&](int n, bool two_zones) {
    std::vector<config::replica> reps;
    for (int r = 0; r < n; ++r) reps.push_back(rep("fast", two_zones && r % 2 ? "b" : "a"));
    return make_plan(1, n * 2, {{4, reps}});
  };
  auto small = simulate(ctx, plan_of(4, false));
  auto big = simulate(ctx, plan_of(300, false));
  REQUIRE(small.ok());
  REQUIRE(big.ok());
  CHECK(big->stages[0].micro_batches == small->stages[0].micro_batches);
  CHECK(big->stages[0].allreduce_s > small->stages[0].allreduce_s);
  CHECK(big->iteration_time_s > small->iteration_time_s);
  CHECK(big->peak_memory_bytes == doctest::Approx(small->peak_memory_bytes));
  REQUIRE(big->memory.size() == 300);
  CHECK(big->gpu_usd_per_hour == doctest::Approx(300 * 2.0));
  // Ring of n: 2(n-1)/n of the gradients per GPU at the NIC's 10 GB/s, 2(n-1) latency steps per bucket.
  const double params = double(f.model.total_params());
  const double buckets = std::ceil(params * 4 / 25e6);
  const double lat = ctx.options().collective_latency_s;
  CHECK(big->stages[0].allreduce_s ==
        doctest::Approx(2.0 * 299 / 300 * params * 4 / 10e9 + buckets * 2 * 299 * lat).epsilon(1e-6));
  // The closed form on the resolved plan agrees, and copies of the plan keep every replica.
  auto rp = resolve(ctx, plan_of(300, true));
  REQUIRE(rp.ok());
  resolved_plan copy = *rp;
  REQUIRE(copy.stages[0].num_replicas == 300);
  CHECK(copy.stages[0].replicas.size() == 300);
  CHECK(copy.stages[0].replicas[299].zone == ctx.zone_id("b"));
  CHECK(copy.stages[0].replicas[298].zone == ctx.zone_id("a"));
  auto q = closed_form(ctx, copy);
  auto e = simulate(ctx, plan_of(300, true));
  REQUIRE(e.ok());
  CHECK(q.iteration_time_s == doctest::Approx(e->iteration_time_s));
  CHECK(q.egress_usd_per_iteration > 0);
  // Two zones: hierarchical (two rings of 150 inside the zones, the shard over 150 across the
  // 1 GB/s link) is slower than a ring of 150 alone; the event simulation agrees.
  std::vector<endpoint> one_zone(150, endpoint{ctx.zone_id("a"), ctx.gpu_id("fast"), 1});
  CHECK(e->stages[0].allreduce_s > ctx.allreduce_s(one_zone.data(), 150, params));
  auto ev = simulate_events(ctx, plan_of(300, true));
  REQUIRE(ev.ok());
  CHECK(ev->iteration_time_s == doctest::Approx(e->iteration_time_s).epsilon(1e-6));
  // 4096 replicas resolve too (beyond the old 64 cap).
  auto huge = resolve(ctx, plan_of(4096, true));
  REQUIRE(huge.ok());
  CHECK(closed_form(ctx, *huge).iteration_time_s > q.iteration_time_s);
}

TEST_CASE("profile smoothing: an affine fit over micro-batch sizes damps a noisy point and extrapolates") {
  fixture f;
  // Per layer: 1 ms + 0.5 ms per sample forward (twice that backward), measured at mbs 1, 2,
  // 4 and 8, with the mbs-4 run 30% slow.
  config::gpu_profile g;
  g.gpu_type = "fast";
  for (int mbs : {1, 2, 4, 8}) {
    const double fwd = (1e-3 + 0.5e-3 * mbs) * (mbs == 4 ? 1.3 : 1.0);
    g.times[mbs][1] = std::vector<config::layer_time>(4, config::layer_time{fwd, 2 * fwd, 0});
  }
  f.profile.by_gpu["fast"] = g;
  sim_options raw_options;
  raw_options.profile_smoothing_octaves = 0;
  auto raw = f.make(raw_options);
  auto smooth = f.make();
  const int fast = smooth.gpu_id("fast");
  // Raw: the profiled value, and proportional scaling beyond the profiled sizes.
  CHECK(raw.compute(fast, 1, 4, 1, 2).forward_s == doctest::Approx(3e-3 * 1.3));
  CHECK(raw.compute(fast, 1, 16, 1, 2).forward_s == doctest::Approx(5e-3 * 2));
  // Smoothed: the noisy point is pulled towards the line through the others (3 ms) ...
  const double at4 = smooth.compute(fast, 1, 4, 1, 2).forward_s;
  CHECK(std::abs(at4 - 3e-3) < 0.5 * std::abs(3e-3 * 1.3 - 3e-3));
  // ... the points on the line stay close to it, and mbs 16 extrapolates the affine law (9 ms),
  // not the proportional one (10 ms).
  CHECK(smooth.compute(fast, 1, 1, 1, 2).forward_s == doctest::Approx(1.5e-3).epsilon(0.1));
  const double at16 = smooth.compute(fast, 1, 16, 1, 2).forward_s;
  CHECK(std::abs(at16 - 9e-3) < std::abs(at16 - 10e-3));
  CHECK(smooth.compute(fast, 1, 4, 1, 2).backward_s == doctest::Approx(2 * at4));
  // Exact affine profiles are unchanged by the smoothing.
  f.profile.by_gpu["fast"].times[4][1] = std::vector<config::layer_time>(4, config::layer_time{3e-3, 6e-3, 0});
  auto exact_ctx = f.make();
  CHECK(exact_ctx.compute(fast, 1, 4, 1, 2).forward_s == doctest::Approx(3e-3));
  CHECK(exact_ctx.compute(fast, 1, 2, 1, 2).forward_s == doctest::Approx(2e-3));
}

TEST_CASE("event simulation with different replica counts per stage: every replica runs its share") {
  fixture f;
  sim_options o;
  o.p2p_latency_s = 0;
  auto ctx = f.make(o);
  // Stage 0: one replica does all 8 micro-batches (2 + 4 ms each); stage 1: two replicas, 4 each.
  auto plan = make_plan(1, 8, {{2, {rep("fast", "a")}}, {2, {rep("fast", "a"), rep("fast", "a")}}});
  auto ev = simulate_events(ctx, plan);
  auto e = simulate(ctx, plan);
  REQUIRE(ev.ok());
  REQUIRE(e.ok());
  int forwards[2] = {0, 0};
  for (const auto& x : ev->events)
    if (x.category == "compute" && x.name[0] == 'F') ++forwards[x.stage];
  CHECK(forwards[0] == 8);
  CHECK(forwards[1] == 8);
  // Stage 0 is the bottleneck: at least its 8 x 6 ms of compute, plus the last micro-batch's
  // way through stage 1 and back.
  CHECK(ev->pipeline_s > 8 * 6e-3 + 6e-3);
  // As our runtime orders work (oldest ready backward first, at most S-s micro-batches in
  // flight), stage 0 runs F F, waits, B B: 16 ms per pair of micro-batches, not 12. The closed
  // form assumes the even 1F1B rhythm and is optimistic here.
  CHECK(ev->pipeline_s > 4 * 16e-3);
  CHECK(ev->pipeline_s < 4 * 16e-3 + 12e-3);
  CHECK(e->iteration_time_s < ev->iteration_time_s);
  // A slow replica in stage 1 only slows the micro-batches routed to it.
  auto slow = make_plan(1, 8, {{2, {rep("fast", "a")}}, {2, {rep("fast", "a"), rep("slow", "a")}}});
  auto evs = simulate_events(ctx, slow);
  REQUIRE(evs.ok());
  CHECK(evs->iteration_time_s > ev->iteration_time_s);

  // Random plans with different counts per stage never deadlock and stay near the closed form.
  fixture g;
  g.model.num_layers = 10;
  for (auto& [name, gp] : g.profile.by_gpu)
    for (auto& [mbs, by_tp] : gp.times)
      for (auto& [tp, v] : by_tp) v.resize(12, v[1]);
  std::mt19937 rng(11);
  double worst = 0;
  for (bool async : {false, true}) {
    sim_options ao;
    ao.overlap_p2p = async;
    auto c = g.make(ao);
    for (int trial = 0; trial < 30; ++trial) {
      const int S = 2 + int(rng() % 3);
      std::vector<std::pair<int, std::vector<config::replica>>> stages;
      int left = 12;
      for (int s = 0; s < S; ++s) {
        const int n = s == S - 1 ? left : 12 / S;
        left -= n;
        std::vector<config::replica> reps(1 + rng() % 3, rep("fast", rng() % 2 ? "a" : "b"));
        stages.push_back({n, reps});
      }
      auto p = make_plan(1, 6 * (1 + int(rng() % 4)), stages);
      auto x = simulate_events(c, p);
      auto y = simulate(c, p);
      REQUIRE_MESSAGE(x.ok(), (x.ok() ? "" : x.error().to_string()));
      REQUIRE(y.ok());
      worst = std::max(worst, std::abs(y->iteration_time_s - x->iteration_time_s) / x->iteration_time_s);
    }
  }
  MESSAGE("closed form vs per-replica events, different counts per stage: worst " << worst * 100 << "%");
  CHECK(worst < 0.5);
}

TEST_CASE("GPT-Neo-2.7 on GCP A100s: Sailor's GCP fits are used as measured, the GH200 ceiling does not bind") {
  const std::string root = std::string(SAILOR_DATA_DIR) + "/sailor";
  auto d = config::load_sailor_data(root, "GPT-Neo-2.7");
  REQUIRE(d.ok());
  sim_inputs in;
  in.model = d->model;
  in.profile = &d->profile;
  in.gpus = d->gpus;
  in.network = &d->network;
  in.job.optimizer = d->optimizer;
  sim_options no_ceiling;
  no_ceiling.job_gbytes_per_s_per_gpu = 0;
  auto ctx = sim_context::make(in);
  auto raw = sim_context::make(in, no_ceiling);
  REQUIRE(ctx.ok());
  REQUIRE(raw.ok());
  REQUIRE(d->model.num_all_layers() == 34);
  std::vector<config::replica> two(2, rep("A100-40", "us-central1-a", 4));
  auto plan = make_plan(2, 64, {{9, two}, {8, two}, {8, two}, {9, two}});
  auto e = simulate(*ctx, plan);
  auto r = simulate(*raw, plan);
  REQUIRE(e.ok());
  REQUIRE(r.ok());
  CHECK(e->iteration_time_s == doctest::Approx(r->iteration_time_s).epsilon(1e-12));
  CHECK_FALSE(e->stages[0].analytic);
  CHECK(e->fits_memory);
  CHECK(e->stages[0].micro_batches == 16);
  // At least the bottleneck stage's 16 micro-batches, and the all-reduce is charged.
  double slowest = 0;
  for (const auto& st : e->stages) slowest = std::max(slowest, st.forward_s + st.backward_s);
  CHECK(e->pipeline_s > 16 * slowest);
  CHECK(e->stages[1].allreduce_s > 0);
  // On GH200 (fits near Slingshot's line rate) the ceiling is what a job gets.
  std::vector<config::replica> gh(2, rep("GH-96", "us-central1-a", 4));
  auto gh_plan = make_plan(4, 64, {{17, gh}, {17, gh}});
  auto ge = simulate(*ctx, gh_plan);
  auto gr = simulate(*raw, gh_plan);
  REQUIRE(ge.ok());
  REQUIRE(gr.ok());
  CHECK(ge->stages[0].allreduce_s > 1.5 * gr->stages[0].allreduce_s);
}

TEST_CASE("our runtime's communication: an all-reduce per layer, a final all-reduce, ranks sharing a host's cores") {
  fixture f;
  sim_options o;
  o.p2p_latency_s = 0;
  o.overlap_p2p = true;
  // DP 2 across the zones (1 ms, 1 GB/s): 4 layers, so 4 calls instead of one bucket.
  auto plan = make_plan(1, 8, {{4, {rep("fast", "a"), rep("fast", "b")}}});
  auto base = simulate(f.make(o), plan);
  REQUIRE(base.ok());
  sim_options per_layer = o;
  per_layer.allreduce_per_layer = true;
  auto pl = simulate(f.make(per_layer), plan);
  REQUIRE(pl.ok());
  // Each extra call pays the ring's 2 steps of (link latency + collective latency).
  const double step = 1e-3 + o.collective_latency_s;
  CHECK(pl->stages[0].allreduce_s - base->stages[0].allreduce_s == doctest::Approx(3 * 2 * step).epsilon(1e-6));
  CHECK(pl->iteration_time_s - base->iteration_time_s == doctest::Approx(3 * 2 * step).epsilon(1e-6));

  // The loss/norm all-reduce over every rank: two replicas across the link, 16 bytes.
  sim_options final_ar = per_layer;
  final_ar.final_allreduce = true;
  auto fa_ctx = f.make(final_ar);
  auto fa = simulate(fa_ctx, plan);
  REQUIRE(fa.ok());
  CHECK(fa->iteration_time_s - pl->iteration_time_s == doctest::Approx(2 * step + 16.0 / 1e9).epsilon(1e-6));
  auto fa_events = simulate_events(fa_ctx, plan);
  REQUIRE(fa_events.ok());
  CHECK(fa_events->iteration_time_s == doctest::Approx(fa->iteration_time_s).epsilon(0.02));

  // Four ranks (2 stages x 2 replicas) on one core: each computes at a quarter of its speed
  // in the schedule, and the iteration takes at least the CPU work of all of them (here the
  // communication's CPU makes that the longer) plus the last sync.
  auto pipeline = make_plan(1, 8, {{2, {rep("fast", "a"), rep("fast", "b")}}, {2, {rep("fast", "a"), rep("fast", "b")}}});
  sim_options shared = final_ar;
  shared.host_cores = 1;
  shared.cpu_per_message_s = 2e-3;
  shared.cpu_per_collective_s = 1e-3;
  auto sctx = f.make(shared);
  auto se = simulate(sctx, pipeline);
  auto oe = simulate(f.make(final_ar), pipeline);  // every rank on its own device
  REQUIRE(se.ok());
  REQUIRE(oe.ok());
  CHECK(se->stages[0].forward_s == doctest::Approx(4 * oe->stages[0].forward_s));
  CHECK(se->stages[1].backward_s == doctest::Approx(4 * oe->stages[1].backward_s));
  // Per rank: 4 micro-batches x 2 layers x 3 ms, 2 messages each, the update, 2 + 1 collectives.
  const double update = oe->stages[0].update_s;
  const double rank_work = 4 * (2 * 3e-3 + 2 * 2e-3) + update + 3 * 1e-3;
  // The final all-reduce over the 4 ranks, two per zone, is the runtime's hierarchical one: a
  // 2-member reduce-scatter inside each zone (1 step), the 2 shards' rings across the link (2 steps,
  // each held by the link's latency), the shards gathered back inside each zone (1 step).
  const double lat = o.collective_latency_s;
  const double tail = se->stages[0].allreduce_s + 2 * step + 3 * lat + 8.0 / 1e9;
  CHECK(se->iteration_time_s == doctest::Approx(4 * rank_work + tail).epsilon(1e-3));
  auto sev = simulate_events(sctx, pipeline);
  REQUIRE(sev.ok());
  CHECK(sev->iteration_time_s == doctest::Approx(se->iteration_time_s).epsilon(1e-6));
  // With as many cores as ranks, the schedule decides, as on devices of their own.
  sim_options roomy = shared;
  roomy.host_cores = 4;
  roomy.cpu_per_message_s = roomy.cpu_per_collective_s = 0;
  auto re = simulate(f.make(roomy), pipeline);
  REQUIRE(re.ok());
  CHECK(re->iteration_time_s == doctest::Approx(oe->iteration_time_s).epsilon(1e-9));
  CHECK(se->iteration_time_s > 3 * oe->iteration_time_s);
}
