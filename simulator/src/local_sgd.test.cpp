// DiLoCo across regions in the simulator: each region's inner iteration, the outer exchange
// amortised over the inner steps and hidden behind the overlap, its egress and memory.
#include "sailor/simulator/simulator.hpp"

#include <doctest/doctest.h>

#include "test_fixtures.hpp"

namespace sailor::simulator::local_sgd_test {

using namespace sailor::simulator::testing;

// Two fast GPUs in each of zones a (region r1) and b (r2), one stage; the cross-region link at
// 10 MB/s, so that the gradient all-reduce across it dominates a synchronous iteration.
struct two_regions : fixture {
  two_regions() { cluster.links[0].bandwidth_gbytes_per_s = 0.01; }
  static config::plan sync_plan() {
    return make_plan(1, 8, {{4, {rep("fast", "a"), rep("fast", "a"), rep("fast", "b"), rep("fast", "b")}}});
  }
  static config::plan diloco_plan(int inner_steps) {
    auto p = sync_plan();
    p.local_sgd = config::local_sgd_plan{inner_steps, {{"r1", {"a"}}, {"r2", {"b"}}}};
    return p;
  }
  estimate run(const config::plan& p, sim_options o = {}) {
    auto ctx = make(o);
    auto e = simulate(ctx, p);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().to_string()));
    return *e;
  }
};

TEST_CASE_FIXTURE(two_regions, "diloco: no all-reduce across regions in an iteration, only inside each") {
  const estimate sync = run(sync_plan());
  const estimate diloco = run(diloco_plan(50));
  // Region r1 alone: its two replicas, the same micro-batches each (global batch 4 over 2).
  const estimate r1 = run(make_plan(1, 4, {{4, {rep("fast", "a"), rep("fast", "a")}}}));
  CHECK(diloco.stages[0].allreduce_s == doctest::Approx(r1.stages[0].allreduce_s));
  CHECK(diloco.stages[0].allreduce_s < sync.stages[0].allreduce_s / 10);
  CHECK(diloco.inner_iteration_s == doctest::Approx(r1.iteration_time_s));
  CHECK(diloco.iteration_time_s == doctest::Approx(diloco.inner_iteration_s + diloco.outer_exposed_s));
  CHECK(sync.inner_iteration_s == 0);
  CHECK(sync.outer_exchange_s == 0);
}

TEST_CASE_FIXTURE(two_regions, "diloco: the event simulation agrees with the closed form") {
  data_parallel.overlap_steps = 0;
  auto ctx = make();
  for (const auto& p : {diloco_plan(10), sync_plan()}) {
    auto closed = simulate(ctx, p);
    auto events = simulate_events(ctx, p);
    REQUIRE(closed.ok());
    REQUIRE(events.ok());
    CHECK(events->iteration_time_s == doctest::Approx(closed->iteration_time_s).epsilon(0.02));
  }
  // Different replica counts per stage: each replica on its own, in its region.
  auto p = make_plan(1, 8, {{2, {rep("fast", "a"), rep("fast", "b")}},
                            {2, {rep("fast", "a"), rep("fast", "b"), rep("fast", "a"), rep("fast", "b")}}});
  p.local_sgd = config::local_sgd_plan{10, {{"r1", {"a"}}, {"r2", {"b"}}}};
  auto events = simulate_events(ctx, p);
  REQUIRE(events.ok());
  auto closed = simulate(ctx, p);
  REQUIRE(closed.ok());
  CHECK(events->iteration_time_s == doctest::Approx(closed->iteration_time_s).epsilon(0.3));
}

TEST_CASE_FIXTURE(two_regions, "diloco over a slow link is faster per iteration than synchronous") {
  const estimate sync = run(sync_plan());
  const estimate diloco = run(diloco_plan(50));
  CHECK(diloco.iteration_time_s < sync.iteration_time_s / 2);
  CHECK(diloco.cost_per_iteration_usd < sync.cost_per_iteration_usd);
  // The exchange, as the runtime runs it: the regions' leaders all-reduce the whole model's
  // deltas (fp32: the gradients' size) across the link, each then broadcasts inside its zone.
  const estimate leaders = run(make_plan(1, 8, {{4, {rep("fast", "a"), rep("fast", "b")}}}));
  CHECK(diloco.outer_exchange_s > leaders.stages[0].allreduce_s);
  CHECK(diloco.outer_exchange_s < leaders.stages[0].allreduce_s * 1.05);
  // The synchronous plan's hierarchical all-reduce runs two rings across the link side by side.
  CHECK(diloco.outer_exchange_s > sync.stages[0].allreduce_s);
}

TEST_CASE_FIXTURE(two_regions, "diloco: more inner steps, less exchange per iteration, and overlap hides it") {
  data_parallel.overlap_steps = 0;  // the exchange blocks: all of it is exposed
  const estimate h10 = run(diloco_plan(10));
  const estimate h100 = run(diloco_plan(100));
  CHECK(h10.outer_exposed_s > 0);
  CHECK(h100.outer_exposed_s == doctest::Approx(h10.outer_exposed_s / 10));
  CHECK(h100.iteration_time_s < h10.iteration_time_s);
  CHECK(h10.outer_exposed_s * 10 >= h10.outer_exchange_s);
  // With the exchange overlapping as many inner iterations as it takes, only the outer step is left.
  const int hide = int(h10.outer_exchange_s / h10.inner_iteration_s) + 1;
  data_parallel.overlap_steps = hide;
  const estimate hidden = run(diloco_plan(10));
  CHECK(hidden.outer_exposed_s < h10.outer_exposed_s / 100);
  // Fragments: each carries 1/4 of the bytes and is hidden on its own.
  data_parallel.overlap_steps = (hide + 3) / 4;
  data_parallel.fragments = 4;
  const estimate fragments = run(diloco_plan(10));
  CHECK(fragments.outer_exposed_s < h10.outer_exposed_s / 10);
}

TEST_CASE_FIXTURE(two_regions, "diloco: int8 deltas make the exchange smaller and cheaper") {
  data_parallel.overlap_steps = 0;
  const estimate fp32 = run(diloco_plan(10));
  data_parallel.compression = config::delta_compression::int8;
  const estimate int8 = run(diloco_plan(10));
  CHECK(int8.outer_exchange_s < fp32.outer_exchange_s / 3);
  CHECK(int8.outer_egress_usd_per_iteration == doctest::Approx(fp32.outer_egress_usd_per_iteration * (1 + 4.0 / 256) / 4));
  CHECK(int8.iteration_time_s < fp32.iteration_time_s);
}

TEST_CASE_FIXTURE(two_regions, "diloco: egress dollars per iteration scale with 1/H") {
  const estimate sync = run(sync_plan());
  const estimate h10 = run(diloco_plan(10));
  const estimate h50 = run(diloco_plan(50));
  REQUIRE(h10.outer_egress_usd_per_iteration > 0);
  CHECK(h50.outer_egress_usd_per_iteration == doctest::Approx(h10.outer_egress_usd_per_iteration / 5));
  // No other traffic leaves a zone: every iteration, synchronous pays the exchange's bytes.
  CHECK(h10.egress_usd_per_iteration == doctest::Approx(h10.outer_egress_usd_per_iteration));
  CHECK(sync.egress_usd_per_iteration == doctest::Approx(h10.egress_usd_per_iteration * 10));
  // Each of the two leaders sends the model's fp32 deltas across the link once per exchange.
  CHECK(h10.egress_bytes_per_iteration == doctest::Approx(2.0 * 4 * double(model.total_params()) / 10));
  CHECK(h50.egress_bytes_per_iteration == doctest::Approx(h10.egress_bytes_per_iteration / 5));
}

TEST_CASE_FIXTURE(two_regions, "diloco: the snapshot and the outer momentum on every replica") {
  const estimate sync = run(sync_plan());
  const estimate diloco = run(diloco_plan(50));
  const double params = double(model.total_params());
  CHECK(diloco.peak_memory_bytes == doctest::Approx(sync.peak_memory_bytes + 8 * params));
  REQUIRE(diloco.memory.size() == 4);
  for (const auto& g : diloco.memory)
    CHECK(g.bytes.optimizer_states == doctest::Approx(sync.memory[0].bytes.optimizer_states + 8 * params));
}

TEST_CASE_FIXTURE(two_regions, "diloco: a pipeline that crosses regions is refused, naming the field") {
  auto p = make_plan(1, 8, {{2, {rep("fast", "a"), rep("fast", "b")}}, {2, {rep("fast", "b"), rep("fast", "a")}}});
  p.local_sgd = config::local_sgd_plan{10, {{"r1", {"a"}}, {"r2", {"b"}}}};
  auto ctx = make();
  auto e = simulate(ctx, p);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().to_string().find("local_sgd.regions") != std::string::npos);
  // The same replicas ordered so that each pipeline stays in its region resolve.
  std::swap(p.stages[1].replicas[0], p.stages[1].replicas[1]);
  CHECK(simulate(ctx, p).ok());
  p.local_sgd->regions[1].zones = {"c"};
  auto missing = simulate(ctx, p);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().to_string().find("zone") != std::string::npos);
}

}  // namespace sailor::simulator::local_sgd_test
