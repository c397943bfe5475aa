// Mixed pools (issue 18, item 6): the planner mixes a GPU type's spot and on-demand pools of one
// zone in one plan, and the estimate prices each pool at its own price.
#include "sailor/planner/planner.hpp"

#include <set>

#include <doctest/doctest.h>

#include "sailor/config/pools.hpp"
#include "test_pools.hpp"

using namespace sailor;
using namespace sailor::planner;

TEST_CASE("a plan over spot and on-demand pools of A100-40 uses both and prices each") {
  auto prob = testing::tiny_problem(0, 0, 0, 0, 32);
  prob.cluster.use_spot_prices = true;
  REQUIRE(config::add_pool_type("A100-40/on-demand", prob.cluster.gpus));
  prob.cluster.zones[0].gpus["A100-40"] = 2;
  prob.cluster.zones[0].gpus["A100-40/on-demand"] = 2;
  auto r = plan_job(prob);
  REQUIRE(r.ok());
  CAPTURE(summary(r->plan));
  std::set<std::string> types;
  double usd_per_hour = 0;
  for (const auto& st : r->plan.stages)
    for (const auto& rep : st.replicas) {
      types.insert(rep.gpu_type);
      usd_per_hour += rep.tp * prob.cluster.usd_per_gpu_hour(rep.gpu_type);
    }
  // Two A100s at spot prices do not hold the plan the four give: both pools are used.
  CHECK(types == std::set<std::string>{"A100-40", "A100-40/on-demand"});
  const auto* a100 = prob.cluster.gpus.find("A100-40");
  CHECK(prob.cluster.usd_per_gpu_hour("A100-40/on-demand") == doctest::Approx(a100->on_demand_usd_per_hour));
  CHECK(usd_per_hour > 0);
  REQUIRE(r->plan.estimate);
  CHECK(r->plan.estimate->cost_per_hour_usd == doctest::Approx(usd_per_hour).epsilon(0.01));
}
