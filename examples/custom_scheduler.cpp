// Your own scheduler: a CAF actor that receives the inventory and availability events and
// returns plans (see sailor/actors/scheduler_api.hpp).
//
// This example starts a coordinator in this process with a scheduler that keeps every
// pipeline inside one zone (one pipeline per zone, as many stages as that zone has devices),
// then four nodes in two emulated zones (in-process, over TCP on loopback). Once every role
// is assigned it preempts one node, and the scheduler re-plans over what is left.
//
//   build/bin/custom_scheduler
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "zone_affine.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

// Polls the coordinator until `ready` holds; bounded.
template <class Predicate>
bool wait_for(caf::actor_system& system, std::uint16_t port, Predicate ready,
              cluster_status& last) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = query_status(system, "127.0.0.1", port, 2s);
    if (s) {
      last = *s;
      if (ready(last))
        return true;
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

void print(const cluster_status& s) {
  std::printf("phase %s, plan v%lld, %d/%d stage actors ready\n%s\n", s.phase.c_str(),
              static_cast<long long>(s.plan_version), s.roles_ready, s.roles_total,
              s.plan_summary.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: custom_scheduler\n\nStarts a coordinator whose scheduler keeps every "
                  "pipeline inside one zone, four\nin-process nodes in two zones, preempts one "
                  "node and waits for the re-plan\n(control plane only; bounded waits of 20 s). "
                  "Exit status 0 when both plans ran.\n");
      return 0;
    }
    std::fprintf(stderr, "custom_scheduler: unknown argument '%s' (try --help)\n", argv[i]);
    return 2;
  }
  runtime_config cfg;
  caf::actor_system system{cfg};

  coordinator_options options;
  options.supervisor.zones = {"local-a", "local-b"};
  options.supervisor.quorum = 4;
  options.supervisor.model_layers = 6;  // the tiny model: embedding, 4 blocks, head
  options.supervisor.scheduler = system.spawn(examples::zone_affine_scheduler);
  auto coord = coordinator::start(system, options);
  if (!coord) {
    std::fprintf(stderr, "cannot start the coordinator: %s\n", coord.error().message.c_str());
    return 1;
  }
  auto port = (*coord)->port();

  std::vector<std::unique_ptr<node>> nodes;
  for (auto [name, zone] : {std::pair{"a1", "local-a"}, std::pair{"a2", "local-a"},
                            std::pair{"b1", "local-b"}, std::pair{"b2", "local-b"}}) {
    node_agent_options agent;
    agent.inventory.name = name;
    agent.inventory.zone = zone;
    agent.inventory.gpu_type = "CPU";
    agent.inventory.host = "localhost";
    agent.inventory.devices = {{0, "cpu", 1ull << 30}, {1, "cpu", 1ull << 30}};
    auto n = node::start(system, "127.0.0.1", port, std::move(agent));
    if (!n) {
      std::fprintf(stderr, "node %s: %s\n", name, n.error().message.c_str());
      return 1;
    }
    nodes.push_back(std::move(*n));
  }

  cluster_status status;
  auto all_ready = [](const cluster_status& s) {
    return s.phase == "running" && s.roles_total > 0 && s.roles_ready == s.roles_total;
  };
  if (!wait_for(system, port, all_ready, status)) {
    std::fprintf(stderr, "roles were not all assigned in time\n");
    return 1;
  }
  print(status);

  std::printf("preempting node b2\n");
  caf::anon_send(nodes.back()->agent(), preempt_atom::value);
  auto replanned = [&](const cluster_status& s) { return all_ready(s) && s.plan_version >= 2; };
  if (!wait_for(system, port, replanned, status)) {
    std::fprintf(stderr, "no new plan in time\n");
    return 1;
  }
  print(status);
  nodes.clear();
  coord->reset();
  caf::anon_send_exit(options.supervisor.scheduler, caf::exit_reason::user_shutdown);
  return 0;
}
