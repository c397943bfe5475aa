// The simulator's physics at scale: all-reduce across TP degrees and zones, stages of hundreds
// of replicas, profile smoothing, unequal replica counts, Sailor's GCP fits and our runtime's
// own communication.
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

TEST_CASE_FIXTURE(with_context, "all-reduce: shard by shard across TP degrees, hierarchical across zones as the runtime runs it") {
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
  auto ring_ctx = make(ring_only);
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
  g.set_blocks(10);
  std::mt19937 rng(11);
  double worst = 0;
  g.with_and_without_overlap([&](const sim_context& c, bool) {
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
  });
  MESSAGE("closed form vs per-replica events, different counts per stage: worst " << worst * 100 << "%");
  CHECK(worst < 0.5);
}

TEST_CASE("GPT-Neo-2.7 on GCP A100s: Sailor's GCP fits are used as measured, the GH200 ceiling does not bind") {
  const std::string root = std::string(SAILOR_DATA_DIR) + "/sailor";
  auto d = config::load_sailor_data(root, "GPT-Neo-2.7");
  REQUIRE(d.ok());
  const auto in = sim_inputs::of(*d);
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

TEST_CASE("the host model: a plan's CPU work at its own count of ranks sharing the host") {
  fixture f;
  sim_options shared;
  shared.host_cores = 2;
  // Measured by two processes at once; one alone does each pass in half the time, four in
  // 1.4 times it (they share caches and memory bandwidth).
  shared.host_cpu_scale = {{1, 0.5}, {2, 1.0}, {4, 1.4}};
  CHECK(host_cpu_scale(shared, 1) == doctest::Approx(0.5));
  CHECK(host_cpu_scale(shared, 2) == doctest::Approx(1.0));
  CHECK(host_cpu_scale(shared, 3) == doctest::Approx(1.2));  // between the counts measured
  CHECK(host_cpu_scale(shared, 8) == doctest::Approx(1.4));  // the nearest count beyond them
  sim_options flat = shared;
  flat.host_cpu_scale.clear();
  CHECK(host_cpu_scale(flat, 1) == 1.0);

  auto alone = make_plan(1, 8, {{4, {rep("fast", "a")}}});
  auto pair = make_plan(1, 8, {{2, {rep("fast", "a")}}, {2, {rep("fast", "a")}}});
  auto quad = make_plan(1, 8, {{1, {rep("fast", "a")}}, {1, {rep("fast", "a")}},
                               {1, {rep("fast", "a")}}, {1, {rep("fast", "a")}}});
  for (const auto* p : {&alone, &pair, &quad}) {
    auto scaled = simulate(f.make(shared), *p);
    auto as_measured = simulate(f.make(flat), *p);
    REQUIRE(scaled.ok());
    REQUIRE(as_measured.ok());
    const double k = p == &alone ? 0.5 : p == &pair ? 1.0 : 1.4;
    CHECK(scaled->stages[0].forward_s == doctest::Approx(k * as_measured->stages[0].forward_s));
    CHECK(scaled->stages[0].backward_s == doctest::Approx(k * as_measured->stages[0].backward_s));
  }
  // The one-rank plan is now the faster of the first two, as the host runs them.
  auto one = simulate(f.make(shared), alone);
  auto two = simulate(f.make(shared), pair);
  auto one_flat = simulate(f.make(flat), alone);
  auto two_flat = simulate(f.make(flat), pair);
  REQUIRE((one.ok() && two.ok() && one_flat.ok() && two_flat.ok()));
  CHECK(one_flat->iteration_time_s > two_flat->iteration_time_s);
  CHECK(one->iteration_time_s < two->iteration_time_s);
}
