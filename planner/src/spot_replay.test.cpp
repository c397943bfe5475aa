// The simulated spot replay: what each policy trains, pays and loses over a small timeline.
#include "sailor/planner/spot_replay.hpp"

#include <doctest/doctest.h>

#include "sailor/config/pools.hpp"
#include "sailor/simulator/host_profile.hpp"
#include "test_pools.hpp"

using namespace sailor;
using namespace sailor::planner;

namespace {

// Two zones of A100-40s, an hour per tick: 8+8, then zone b falls to 2, then back to 8+8.
availability_timeline two_zone_timeline() {
  availability_timeline t;
  t.tick_s = 3600;
  t.columns = {{"A100-40", "r1-a", "test"}, {"A100-40", "r1-b", "test"}};
  t.start_s = {0, 3600, 7200};
  t.counts = {{8, 8}, {8, 2}, {8, 8}};
  t.end_s = 3 * 3600;
  return t;
}

problem two_zone_problem() {
  auto prob = planner::testing::tiny_problem(8, 8, 0, 0, 32);
  prob.cluster.use_spot_prices = true;
  return prob;
}

recovery_model fixed_recovery(double no_notice) {
  recovery_model rec;
  rec.planning_s = 0.1;  // fixed, so the figures do not depend on the machine's speed
  rec.no_notice_fraction = no_notice;
  rec.checkpoint_interval_s = 1800;
  return rec;
}

}  // namespace

TEST_CASE("on-demand only: the trace's peak at on-demand prices, never preempted") {
  spot_replayer replay(two_zone_problem(), two_zone_timeline(), fixed_recovery(0));
  auto od = replay.run(spot_policy::on_demand);
  const auto& e = replay.plan_for({8, 8}, true);
  REQUIRE(e.ok);
  CHECK(od.iterations == doctest::Approx(e.throughput * 3 * 3600));
  CHECK(od.lost_iterations == 0);
  CHECK(od.recovery_s_total == 0);
  // 3.673 $/GPU-hour on demand (the catalog's A100-40) for the GPUs the plan holds.
  CHECK(od.dollars >= e.plan.total_gpus() * 3.673 * 3);
  const auto& spot = replay.plan_for({8, 8});
  CHECK(spot.gpu_usd_per_s < e.gpu_usd_per_s);
}

TEST_CASE("survivors hold every layer while each stage keeps a replica") {
  const std::vector<trace_column> columns{{"A100-40", "r1-a", ""}, {"A100-40", "r1-b", ""}};
  config::plan p;
  p.stages.resize(2);
  p.stages[0].first_layer = 0;
  p.stages[0].num_layers = 3;
  p.stages[1].first_layer = 3;
  p.stages[1].num_layers = 3;
  // Stage 0: one replica in each zone; stage 1: one replica in zone b.
  p.stages[0].replicas = {{"A100-40", "r1-a", 1, {}}, {"A100-40", "r1-b", 1, {}}};
  p.stages[1].replicas = {{"A100-40", "r1-b", 1, {}}};
  CHECK(survivors_hold_every_layer(p, columns, {1, 2}, {1, 2}));
  CHECK(survivors_hold_every_layer(p, columns, {1, 2}, {0, 2}));   // stage 0 keeps zone b's
  CHECK_FALSE(survivors_hold_every_layer(p, columns, {1, 2}, {1, 1}));  // stage 1's only replica
  CHECK_FALSE(survivors_hold_every_layer(p, columns, {1, 2}, {1, 0}));
}

TEST_CASE("a fall without notice: ours loses the iteration in flight unless a stage is gone, restart its work since the checkpoint") {
  // The fall comes 20 min after the checkpoint at 3600 s (every 30 min).
  auto t = two_zone_timeline();
  t.start_s = {0, 4800, 7200};
  spot_replayer replay(two_zone_problem(), t, fixed_recovery(1.0));
  auto ours = replay.run(spot_policy::ours);
  auto restart = replay.run(spot_policy::restart_from_checkpoint);
  const auto& full = replay.plan_for({8, 8});
  REQUIRE(full.ok);
  REQUIRE(full.held[1] > 2);  // the plan uses zone b beyond what is left of it
  CHECK(ours.preemptions_without_notice == 1);
  CHECK(restart.preemptions_without_notice == 1);
  const double since_checkpoint = 4800 - 3600;
  CHECK(restart.lost_iterations == doctest::Approx(full.throughput * since_checkpoint).epsilon(0.01));
  if (survivors_hold_every_layer(full.plan, t.columns, full.held, {8, 2}))
    CHECK(ours.lost_iterations == doctest::Approx(0.5));
  else
    CHECK(ours.lost_iterations == doctest::Approx(restart.lost_iterations));
  CHECK(ours.iterations >= restart.iterations);
  CHECK(ours.recovery_s_total > 0);
  CHECK(restart.recovery_s_total >= ours.recovery_s_total);
}

TEST_CASE("preemptions with notice lose no iteration, and the job grows back") {
  spot_replayer replay(two_zone_problem(), two_zone_timeline(), fixed_recovery(0));
  for (auto objective : {spot_objective::throughput, spot_objective::liveput}) {
    auto ours = replay.run(spot_policy::ours, objective);
    CAPTURE(to_string(objective));
    CHECK(ours.lost_iterations == 0);
    CHECK(ours.waiting_s == 0);
    CHECK(ours.iterations > 0);
  }
  auto peak = replay.run(spot_policy::ours, spot_objective::throughput);
  CHECK(peak.preemptions_with_notice == 1);
  REQUIRE(peak.changes.size() == 3);  // start, the fall, growth back to 16
  CHECK(peak.changes[1].why == "preemption (notice)");
  CHECK(peak.changes[2].why == "growth");
  CHECK(peak.changes[2].gpus_after > peak.changes[1].gpus_after);
  // Three ticks, two capacity vectors: the throughput objective plans each once.
  CHECK(replay.planner_calls() >= 2);
}

TEST_CASE("static: the plan over the start's capacity waits while its GPUs are gone") {
  spot_replayer replay(two_zone_problem(), two_zone_timeline(), fixed_recovery(0));
  auto st = replay.run(spot_policy::static_plan);
  const auto& first = replay.plan_for({8, 8});
  if (first.held[1] > 2) {
    CHECK(st.waiting_s == doctest::Approx(3600));
    CHECK(st.changes.back().why == "capacity back");
  }
  CHECK(st.iterations < first.throughput * 3 * 3600);
}

TEST_CASE("preemption history: falls below a level, per second, from the past only") {
  preemption_history h(1);
  h.observe({16}, 0);
  h.observe({10}, 3600);
  h.observe({16}, 3600);
  h.observe({4}, 3600);
  // Falls below 12: two (16->10, 16->4); below 8: one; below 2: none.
  const double prior = 12 * 3600.0;
  CHECK(h.crossing_rate(0, 12) == doctest::Approx(3.0 / (3 * 3600 + prior)));
  CHECK(h.crossing_rate(0, 8) == doctest::Approx(2.0 / (3 * 3600 + prior)));
  CHECK(h.crossing_rate(0, 2) == doctest::Approx(1.0 / (3 * 3600 + prior)));
}

TEST_CASE("an on-demand pool beside the trace: a constant column, mixed into ours' plans and priced on demand") {
  auto prob = two_zone_problem();
  REQUIRE(config::add_pool_type("A100-40/on-demand", prob.cluster.gpus));
  prob.cluster.zones[0].gpus["A100-40/on-demand"] = 2;
  auto t = two_zone_timeline();
  REQUIRE(add_pool_columns(t, prob.cluster) == 1);
  REQUIRE(t.columns.size() == 3);
  CHECK(t.columns[2].gpu_type == "A100-40/on-demand");
  CHECK(t.counts[1] == std::vector<int>{8, 2, 2});
  prob.cluster = cluster_for(t, prob.cluster);
  spot_replayer replay(prob, t, fixed_recovery(0));
  const auto& e = replay.plan_for({8, 2, 2});
  REQUIRE(e.ok);
  // Ours pays each GPU it holds at its pool's price: the on-demand ones at the catalog's 3.673
  // $/hour, the spot ones at the spot price.
  const auto* a100 = prob.cluster.gpus.find("A100-40");
  const double expected = (e.held[0] + e.held[1]) * a100->spot_usd_per_hour + e.held[2] * a100->on_demand_usd_per_hour;
  CHECK(e.held[2] > 0);  // the plan over 8 + 2 spot GPUs takes the 2 on-demand ones too
  CHECK(e.gpu_usd_per_s * 3600 == doctest::Approx(expected));
  auto ours = replay.run(spot_policy::ours);
  CHECK(ours.iterations > 0);
}

TEST_CASE("the host figures reach the simulated replay: ranks sharing fewer cores train fewer iterations") {
  // Every rank a process of one host (CPU training): the same profile, read as CPU work, on a
  // host that gives the ranks 16 cores and on one that gives them 2.
  simulator::measured_profile host;
  host.profile = two_zone_problem().profile;
  host.ranks = 4;
  host.cpu_per_message_s = 1e-4;
  host.cpu_per_collective_s = 1e-3;
  auto on_host = [&](double cores) {
    host.host_cores = cores;
    problem prob = two_zone_problem();
    prob.sim = simulator::cpu_sim_options(&host);
    return prob;
  };
  spot_replayer roomy(on_host(16), two_zone_timeline(), fixed_recovery(0));
  spot_replayer crowded(on_host(2), two_zone_timeline(), fixed_recovery(0));
  const auto fast = roomy.run(spot_policy::ours), slow = crowded.run(spot_policy::ours);
  REQUIRE(fast.iterations > 0);
  CHECK(slow.iterations > 0);
  CHECK(slow.iterations < 0.9 * fast.iterations);
  CHECK(crowded.plan_for({8, 8}).throughput < roomy.plan_for({8, 8}).throughput);
  // The time model is the same: only the speed differs.
  CHECK(slow.training_s == doctest::Approx(fast.training_s).epsilon(0.01));
}

namespace {

// Ours over `counts` (the two-zone timeline's), with checkpoints kept where they outlive
// every node and with checkpoints only on the nodes; also the plan over both zones in full.
struct kept_and_local {
  replay_totals kept, node_local;
  spot_replayer::entry full;
};
kept_and_local run_both(std::vector<std::vector<int>> counts, double no_notice) {
  auto t = two_zone_timeline();
  t.counts = std::move(counts);
  auto rec = fixed_recovery(no_notice);
  spot_replayer replay(two_zone_problem(), t, rec);
  kept_and_local out;
  out.kept = replay.run(spot_policy::ours);
  rec.checkpoints_outlive_nodes = false;
  replay.set_recovery(rec);
  out.node_local = replay.run(spot_policy::ours);
  out.full = replay.plan_for({8, 8});
  return out;
}

}  // namespace

TEST_CASE("checkpoints only on the nodes: a fall of every node starts over, a fall of one zone does not") {
  // Every GPU gone for an hour, with notice.
  const auto all = run_both({{8, 8}, {0, 0}, {8, 8}}, 0);
  REQUIRE(all.full.ok);
  CHECK(all.kept.lost_iterations == 0);
  CHECK(all.kept.waiting_s == doctest::Approx(3600));
  // The first hour's iterations are lost with the nodes that held their state.
  CHECK(all.node_local.lost_iterations == doctest::Approx(all.full.throughput * 3600).epsilon(0.01));
  CHECK(all.node_local.iterations ==
        doctest::Approx(all.kept.iterations - all.node_local.lost_iterations).epsilon(0.01));
  // A zone lost without notice while the other stays: the other stage's nodes hold copies
  // of the checkpoint, so node-local checkpoints roll back no further than kept ones.
  const auto one = run_both({{8, 8}, {8, 0}, {8, 8}}, 1);
  CHECK(one.node_local.lost_iterations == doctest::Approx(one.kept.lost_iterations));
  CHECK(one.node_local.iterations == doctest::Approx(one.kept.iterations));
  CHECK(every_node_gone({8, 8}, {0, 0}));
  CHECK_FALSE(every_node_gone({8, 0}, {1, 0}));
}

TEST_CASE("another plan source: every GPU a replica, grown on every rise as a live coordinator does") {
  // A zone that grows from 2 to 8 GPUs; plans that use every GPU of it, estimated by the simulator.
  availability_timeline t;
  t.tick_s = 3600;
  t.columns = {{"A100-40", "r1-a", "test"}};
  t.start_s = {0, 3600};
  t.counts = {{2}, {8}};
  t.end_s = 2 * 3600;
  problem prob = planner::testing::tiny_problem(8, 0, 0, 0, 32);
  prob.cluster.use_spot_prices = true;
  int calls = 0;
  auto every_gpu = [&calls](const problem& p) -> result<plan_result> {
    ++calls;
    config::plan plan;
    plan.micro_batch = 1;
    plan.global_batch = p.job.global_batch;
    plan.stages.resize(1);
    plan.stages[0].first_layer = 0;
    plan.stages[0].num_layers = p.model.num_all_layers();
    for (const auto& z : p.cluster.zones)
      for (const auto& [type, count] : z.gpus)
        plan.stages[0].replicas.push_back({type, z.name, count, {}});  // one replica of TP count
    auto e = estimate_plan(p, plan);
    if (!e) return e.error();
    plan.estimate = e->summary();
    // A source whose larger plans are slower (as ranks sharing one host's cores can be).
    plan.estimate->throughput_iters_per_s = 1.0 / plan.total_gpus();
    plan.estimate->cost_per_iteration_usd = 0;
    return plan_result{plan, *e, 0, 0, 0};
  };
  spot_replayer replay(prob, t, fixed_recovery(0));
  replay.set_plan_source(every_gpu);
  const auto& small = replay.plan_for({2});
  const auto& large = replay.plan_for({8});
  REQUIRE(small.ok);
  REQUIRE(large.ok);
  CHECK(calls == 2);
  CHECK(large.held[0] == 8);
  // By throughput alone ours stays on 2 GPUs.
  REQUIRE(large.throughput < small.throughput);
  const auto kept = replay.run(spot_policy::ours);
  CHECK(kept.changes.size() == 1);
  CHECK(kept.gpu_hours == doctest::Approx(2 + 2));
  CHECK(replay.run(spot_policy::restart_from_checkpoint).changes.size() == 1);
  replay.set_grow_on_every_rise(true);
  const auto grown = replay.run(spot_policy::ours);
  REQUIRE(grown.changes.size() == 2);
  CHECK(grown.changes[1].why == "growth");
  CHECK(grown.changes[1].gpus_after == 8);
  CHECK(grown.gpu_hours == doctest::Approx(2 + 8));
  // The live replay's restart_from_checkpoint restarts onto every node as well.
  const auto restarted = replay.run(spot_policy::restart_from_checkpoint);
  REQUIRE(restarted.changes.size() == 2);
  CHECK(restarted.changes[1].gpus_after == 8);
}
