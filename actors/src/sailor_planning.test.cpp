#include "sailor/actors/sailor_planning.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "sailor/actors/placement.hpp"

using namespace sailor;
using namespace sailor::actors;

namespace {

// A 6-layer model with synthetic profiles of two GPU types in two zones of one region.
planner::problem small_problem() {
  planner::problem prob;
  prob.model = {.name = "small", .num_layers = 4, .hidden = 1024, .heads = 16,
                .sequence = 1024, .vocabulary = 32000};
  prob.profile.model = "small";
  for (auto [gpu, block] : {std::pair{"A100-40", 0.010}, std::pair{"V100-16", 0.024}}) {
    config::gpu_profile p;
    p.gpu_type = gpu;
    for (int b : {1, 2, 4})
      for (int t : {1, 2, 4}) {
        std::vector<config::layer_time> layers;
        for (int l = 0; l < 6; ++l) {
          double scale = l == 0 ? 0.1 : l == 5 ? 2.0 : 1.0;
          double f = block * scale * b / std::pow(double(t), 0.85);
          layers.push_back({f, 2 * f, 0.002 * scale / t});
        }
        p.times[b][t] = layers;
      }
    prob.profile.by_gpu[gpu] = p;
  }
  for (int t : {1, 2, 4}) {
    std::vector<config::layer_size> sizes(6);
    for (int l = 0; l < 6; ++l) {
      sizes[l].params_floats = 0.1e9 / t;
      sizes[l].act_output_floats = 4e6;
      sizes[l].act_input_floats = 4e6;
      sizes[l].act_mem_floats = 0.05e9 / t;
    }
    prob.profile.sizes_by_tp[t] = sizes;
  }
  prob.cluster.name = "two-zones";
  prob.cluster.regions = {config::region{"us-central1", {"us-central1-a", "us-central1-b"}}};
  prob.cluster.zones = {config::zone{"us-central1-a", "us-central1", {{"A100-40", 8}}},
                        config::zone{"us-central1-b", "us-central1", {{"A100-40", 8}}}};
  prob.job.global_batch = 16;
  return prob;
}

node_inventory gpu_node(std::string name, std::string zone, int devices) {
  node_inventory n{std::move(name), std::move(zone), "A100-40", "host", {}};
  for (int k = 0; k < devices; ++k)
    n.devices.push_back(device_info{k, "cuda", 40ull << 30});
  return n;
}

// A job's first plan request: a1 with 4 GPUs in zone a, b1 with 2 in zone b.
plan_request first_request() {
  plan_request request;
  request.request_id = 1;
  request.nodes = {gpu_node("a1", "us-central1-a", 4), gpu_node("b1", "us-central1-b", 2)};
  return request;
}

}  // namespace

TEST_CASE("sailor planning: plans over the joined devices only, and the plan places on them") {
  auto plan = sailor_planning(small_problem());
  auto request = first_request();
  auto chosen = plan(request);
  INFO((chosen ? "" : chosen.error().message));
  REQUIRE(chosen.ok());
  // Never more GPUs than joined, though the cluster file lists 16.
  CHECK(chosen->total_gpus() <= 6);
  CHECK(chosen->total_gpus() >= 1);
  auto placed = *chosen;
  CHECK_FALSE(place_replicas(placed, request.nodes).has_value());
  for (auto& stage : placed.stages)
    for (auto& r : stage.replicas)
      CHECK(static_cast<int>(r.nodes.size()) == r.tp);
  // Re-planning after a node is lost: still only what is left.
  plan_request again;
  again.request_id = 2;
  again.nodes = {gpu_node("a1", "us-central1-a", 4)};
  again.has_current = true;
  again.current = placed;
  auto second = plan(again);
  REQUIRE(second.ok());
  CHECK(second->total_gpus() <= 4);
  for (auto& stage : second->stages)
    for (auto& r : stage.replicas) {
      CHECK(r.zone == "us-central1-a");
      CHECK(r.nodes.empty());
    }
  CHECK_FALSE(place_replicas(*second, again.nodes).has_value());
}

TEST_CASE("sailor planning: a GPU type without a profile is an error, not a plan") {
  auto plan = sailor_planning(small_problem());
  plan_request request;
  request.request_id = 1;
  auto cpu = gpu_node("c1", "us-central1-a", 2);
  cpu.gpu_type = "CPU";
  request.nodes = {cpu};
  auto chosen = plan(request);
  CHECK_FALSE(chosen.ok());
}

TEST_CASE("sailor planning: a scheduler's cost cap (objective_change) binds the plan") {
  auto plan = sailor_planning(small_problem());
  auto request = first_request();
  auto free = plan(request);
  REQUIRE(free.ok());
  REQUIRE(free->estimate);
  REQUIRE(free->estimate->cost_per_hour_usd > 0);
  // Below what any plan costs: none.
  request.objective = {"max_cost_per_hour=0.000001"};
  CHECK_FALSE(plan(request).ok());
  // A cap at the free plan's cost: a plan within it.
  request.objective = {"max_cost_per_hour=" + std::to_string(free->estimate->cost_per_hour_usd)};
  auto capped = plan(request);
  REQUIRE(capped.ok());
  CHECK(capped->estimate->cost_per_hour_usd <= free->estimate->cost_per_hour_usd + 1e-6);
}
