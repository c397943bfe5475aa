// Choosing among near-equal plans: the robust one (issue 13: cross-region traffic, micro-batch
// counts that round up).
#include "sailor/planner/planner.hpp"

#include <cstdio>

#include <doctest/doctest.h>

#include "test_pools.hpp"

using namespace sailor;
using namespace sailor::planner;
using sailor::planner::testing::tiny_problem;

namespace {

config::replica rep(const char* zone, int tp = 1) { return {"A100-40", zone, tp, {}, {}}; }

config::plan one_stage(int mbs, int gbs, std::vector<config::replica> reps) {
  config::plan p;
  p.micro_batch = mbs;
  p.global_batch = gbs;
  config::stage_plan s;
  s.first_layer = 0;
  s.num_layers = 6;
  s.replicas = std::move(reps);
  p.stages.push_back(s);
  return p;
}

}  // namespace

TEST_CASE("robustness of a plan: micro-batch slots lost to rounding, bytes across regions") {
  auto prob = tiny_problem(8, 0, 0, 0);
  prob.cluster.regions.push_back({"r2", {"r2-a"}});
  prob.cluster.zones.push_back({"r2-a", "r2", {{"A100-40", 8}}});
  // 32 sequences over 3 replicas at micro-batch 4: the busiest runs 3 micro-batches (11 -> 12
  // sequences), 36 slots for 32: 12.5% lost. Over 4 replicas: none.
  auto three = robustness_of(prob.cluster, prob.model, one_stage(4, 32, {rep("r1-a"), rep("r1-a"), rep("r1-b")}));
  CHECK(three.rounding_waste == doctest::Approx(36.0 / 32 - 1));
  CHECK(three.cross_region_bytes == 0);  // two zones, one region
  auto four = robustness_of(prob.cluster, prob.model, one_stage(4, 32, std::vector<config::replica>(4, rep("r1-a"))));
  CHECK(four.rounding_waste == 0);
  // A ring over two regions crosses them twice with 2(R-1)/R of the gradients (fp32).
  auto spread = robustness_of(prob.cluster, prob.model, one_stage(4, 32, {rep("r1-a"), rep("r2-a")}));
  double params = 0;
  for (int l = 0; l < 6; ++l) params += double(prob.model.params_of_layer(l));
  CHECK(spread.cross_region_bytes == doctest::Approx(2 * 2.0 * 1 / 2 * params * 4));
}

TEST_CASE("among plans within the simulator's error the robust one is chosen, never more than that slower") {
  int changed = 0;
  for (int gbs : {24, 28, 32, 36, 40, 44}) {
    for (auto prob : {tiny_problem(6, 0, 0, 0, gbs), tiny_problem(5, 2, 3, 0, gbs), tiny_problem(4, 4, 0, 4, gbs)}) {
      CAPTURE(gbs);
      options exact;
      exact.robust_tolerance = 0;
      auto best = plan_job(prob, exact);
      auto robust = plan_job(prob);
      REQUIRE(best.ok());
      REQUIRE(robust.ok());
      const double vb = objective_value(prob.job, *best->plan.estimate);
      const double vr = objective_value(prob.job, *robust->plan.estimate);
      CHECK(vr <= vb * 1.03 * (1 + 1e-12));
      const auto rb = robustness_of(prob.cluster, prob.model, best->plan);
      const auto rr = robustness_of(prob.cluster, prob.model, robust->plan);
      CHECK(rr.cross_region_bytes <= rb.cross_region_bytes);
      // What it gives up in time it wins back in slots that do not round up.
      CHECK(vr * (1 + rr.rounding_waste) <= vb * (1 + rb.rounding_waste) * (1 + 1e-12));
      if (summary(best->plan) != summary(robust->plan)) ++changed;
    }
  }
  MESSAGE("plans changed by the preference: " << changed << " of 18");
}
