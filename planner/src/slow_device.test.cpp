// A straggler planned at its measured speed (issue 14): one device of a type, measured slower
// than its peers, becomes a type of its own (simulator::add_slowed_type); the search then
// gives it the share its speed is worth, or leaves it out when that is faster.
#include <doctest/doctest.h>

#include <string>

#include "sailor/planner/planner.hpp"
#include "sailor/simulator/correction.hpp"
#include "test_pools.hpp"

using namespace sailor;
using namespace sailor::planner;
using sailor::planner::testing::tiny_problem;

namespace {

// Layers held by stages whose replicas include `type`, and GPUs of that type in the plan.
std::pair<int, int> share_of(const config::plan& p, const std::string& type) {
  int layers = 0, gpus = 0;
  for (const auto& s : p.stages) {
    bool holds = false;
    for (const auto& r : s.replicas)
      if (r.gpu_type == type) {
        holds = true;
        gpus += r.tp;
      }
    if (holds)
      layers += s.num_layers;
  }
  return {layers, gpus};
}

// The tiny pool's A100s of zone a, `slow` of them measured `factor` times slower.
problem with_slow(int a100, int slow, double factor) {
  auto prob = tiny_problem(a100 - slow, 0, 0, 0);
  auto name = simulator::add_slowed_type("A100-40", factor, prob.cluster.gpus, &prob.profile);
  REQUIRE(!name.empty());
  prob.cluster.zones[0].gpus[name] = slow;
  return prob;
}

}  // namespace

TEST_CASE("slow device: planned as its own type, named after its base type") {
  auto prob = tiny_problem(4, 0, 0, 0);
  config::gpu_catalog catalog = prob.cluster.gpus;
  auto name = simulator::add_slowed_type("A100-40", 2.0, catalog, &prob.profile);
  CHECK(name == "A100-40~slow2.00x");
  CHECK(simulator::slowed_base_type(name) == "A100-40");
  CHECK(simulator::slowed_base_type("A100-40").empty());
  REQUIRE(catalog.find(name));
  CHECK(catalog.find(name)->peak_fp16_tflops ==
        doctest::Approx(catalog.find("A100-40")->peak_fp16_tflops / 2));
  CHECK(prob.profile.by_gpu.at(name).times.at(1).at(1)[1].forward_s ==
        doctest::Approx(2 * prob.profile.by_gpu.at("A100-40").times.at(1).at(1)[1].forward_s));
  // Nothing to slow, or no slowdown: nothing added.
  CHECK(simulator::add_slowed_type("nope", 2.0, catalog, &prob.profile).empty());
  CHECK(simulator::add_slowed_type("A100-40", 1.0, catalog, &prob.profile).empty());
}

TEST_CASE("slow device: the search keeps a mildly slow device with a smaller share, drops a very slow one") {
  auto all = plan_job(tiny_problem(4, 0, 0, 0));
  REQUIRE(all.ok());
  const auto everyone = share_of(all->plan, "A100-40");
  CAPTURE(summary(all->plan));
  REQUIRE(everyone.second == 4);  // the pool's best plan uses every A100

  auto mild = with_slow(4, 1, 1.5);
  auto kept = plan_job(mild);
  REQUIRE(kept.ok());
  const std::string slow_name = simulator::slowed_type_name("A100-40", 1.5);
  const auto slow_share = share_of(kept->plan, slow_name);
  CAPTURE(summary(kept->plan));
  CHECK(slow_share.second == 1);  // kept
  // Its share is smaller than a healthy device's: fewer layers than the healthy devices hold
  // per device (here one block, against [0,4) on two and the head on one).
  const auto fast_share = share_of(kept->plan, "A100-40");
  CHECK(slow_share.first >= 1);
  CHECK(slow_share.first * fast_share.second < fast_share.first);
  // And the plan with it beats the best plan of the three healthy ones alone.
  auto three = plan_job(tiny_problem(3, 0, 0, 0));
  REQUIRE(three.ok());
  CHECK(kept->plan.estimate->iteration_time_s < three->plan.estimate->iteration_time_s);

  auto very = with_slow(4, 1, 20.0);
  auto dropped = plan_job(very);
  REQUIRE(dropped.ok());
  CAPTURE(summary(dropped->plan));
  CHECK(share_of(dropped->plan, simulator::slowed_type_name("A100-40", 20.0)).second == 0);
}
