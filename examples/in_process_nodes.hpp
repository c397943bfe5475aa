#pragma once
// What the examples with in-process nodes share (custom_scheduler.cpp,
// cost_capping_scheduler.cpp, remote_scheduler.cpp): the coordinator's options for the tiny
// model, nodes of CPU devices on loopback, and a bounded wait for the coordinator's status. minimal_scheduler.cpp stays whole on its own: the
// docs/scheduler-api.md shows it as a complete program.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sailor/actors/runtime.hpp"

namespace examples {

using namespace sailor::actors;

// The options of a coordinator of the tiny model (6 layers: embedding, 4 blocks, head) whose
// nodes are in `zones`, planning once `quorum` nodes joined; the caller adds its scheduler.
inline coordinator_options tiny_model_coordinator(std::vector<std::string> zones, int quorum) {
  coordinator_options options;
  options.supervisor.zones = std::move(zones);
  options.supervisor.quorum = quorum;
  options.supervisor.model_layers = 6;
  return options;
}

// One node of this process: `name` in `zone` on localhost, with `devices` CPU devices of 1 GiB
// each, all of type `gpu_type`.
struct local_node {
  const char* name;
  const char* zone;
  const char* gpu_type = "CPU";
  int devices = 1;
};

// Starts the nodes, each joining the coordinator at 127.0.0.1:`port`. On the first that does
// not start, the error says which node and why ("node NAME: why").
inline sailor::result<std::vector<std::unique_ptr<node>>> start_nodes(
    caf::actor_system& system, std::uint16_t port, const std::vector<local_node>& wanted) {
  std::vector<std::unique_ptr<node>> nodes;
  for (const auto& w : wanted) {
    node_agent_options agent;
    agent.inventory = node_inventory{w.name, w.zone, w.gpu_type, "localhost", {}, "", {}};
    for (int d = 0; d < w.devices; ++d)
      agent.inventory.devices.push_back({d, "cpu", 1ull << 30});
    auto n = node::start(system, "127.0.0.1", port, std::move(agent));
    if (!n)
      return sailor::error::failed("node " + std::string(w.name) + ": " + n.error().message);
    nodes.push_back(std::move(*n));
  }
  return nodes;
}

// Polls the coordinator at 127.0.0.1:`port` until `ready` holds of its status: that status, or
// none after 20 s.
inline std::optional<cluster_status> wait_for(
    caf::actor_system& system, std::uint16_t port,
    const std::function<bool(const cluster_status&)>& ready) {
  using namespace std::chrono_literals;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto s = query_status(system, "127.0.0.1", port, 2s); s && ready(*s))
      return *s;
    std::this_thread::sleep_for(50ms);  // sleep override: polls another actor system, bounded
  }
  return std::nullopt;
}

}  // namespace examples
