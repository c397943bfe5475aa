// Many zones (issue 19 item 13): zone sets are pruned by region and bandwidth before the
// search, so a cloud's hundreds of zones cost about what tens do.
#include "sailor/planner/planner.hpp"

#include <string>

#include <doctest/doctest.h>

#include "test_pools.hpp"

using namespace sailor;
using namespace sailor::planner;

namespace {

// `zones` zones of 4 A100s in regions of three zones.
problem cloud(int zones) {
  auto prob = planner::testing::tiny_problem(0, 0, 0, 0);
  prob.cluster.zones.clear();
  prob.cluster.regions.clear();
  for (int z = 0; z < zones; ++z) {
    const std::string region = "region" + std::to_string(z / 3);
    const std::string name = region + "-" + char('a' + z % 3);
    prob.cluster.zones.push_back({name, region, {{"A100-40", 4}}});
    if (z % 3 == 0) prob.cluster.regions.push_back({region, {}});
    prob.cluster.regions.back().zones.push_back(name);
  }
  return prob;
}

}  // namespace

TEST_CASE("three hundred zones: the zone sets searched grow with the logarithm of the regions") {
  auto small = plan_job(cloud(30));
  auto large = plan_job(cloud(300));
  REQUIRE(small.ok());
  REQUIRE(large.ok());
  MESSAGE("configurations searched: 30 zones " << small->configurations << ", 300 zones " << large->configurations);
  // 10 regions against 100: at most a few more zone sets (each several configurations).
  CHECK(large->configurations <= 2 * small->configurations);
  // The ten times larger pool is no slower to train on.
  CHECK(large->plan.estimate->iteration_time_s <= small->plan.estimate->iteration_time_s * (1 + 1e-9));
}

TEST_CASE("a pool of a few regions keeps every region and every chain of regions") {
  // 5 regions of 3 zones: the sets are the same as without pruning (2, 3 and 4 regions).
  auto pruned = plan_job(cloud(15));
  options whole;
  whole.zone_subsets = false;
  auto all_zones = plan_job(cloud(15), whole);
  REQUIRE(pruned.ok());
  REQUIRE(all_zones.ok());
  CHECK(pruned->plan.estimate->iteration_time_s <= all_zones->plan.estimate->iteration_time_s * (1 + 1e-9));
}
