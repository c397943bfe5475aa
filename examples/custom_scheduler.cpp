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
#include <thread>

#include <caf/all.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/scheduler_api.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

constexpr int model_layers = 6;  // embedding + 4 blocks + head

struct zone_affine_state {
  int events = 0;
  static inline const char* name = "zone_affine_scheduler";
};

// One pipeline per zone; a zone's pipeline has one stage per device of that zone, and stages
// of different zones with the same index are data-parallel replicas of each other. So every
// zone must offer the same number of devices; the smallest count wins.
caf::behavior zone_affine_scheduler(caf::stateful_actor<zone_affine_state>* self) {
  return {
    [self](const plan_request& request) -> plan_reply {
      std::map<std::string, std::vector<std::pair<std::string, int>>> by_zone;
      std::map<std::string, std::string> gpu_of;
      for (auto& node : request.nodes)
        for (auto& device : node.devices) {
          by_zone[node.zone].emplace_back(node.name, device.index);
          gpu_of[node.zone] = node.gpu_type;
        }
      if (by_zone.empty())
        return plan_reply::failure(request.request_id, "no devices");
      std::size_t depth = model_layers;
      for (auto& [zone, devices] : by_zone)
        depth = std::min(depth, devices.size());
      sailor::config::plan plan;
      plan.global_batch = 8;
      int first = 0;
      for (std::size_t s = 0; s < depth; ++s) {
        sailor::config::stage_plan stage;
        stage.first_layer = first;
        stage.num_layers = model_layers / static_cast<int>(depth) +
                           (s < model_layers % depth ? 1 : 0);
        first += stage.num_layers;
        for (auto& [zone, devices] : by_zone)
          // Placed here, by name: the supervisor checks the devices and uses them as given.
          stage.replicas.push_back(sailor::config::replica{
            gpu_of[zone], zone, 1, {devices[s].first}, {devices[s].second}});
        plan.stages.push_back(std::move(stage));
      }
      std::printf("[scheduler] request %lld (%s): %zu stages x %zu zones\n",
                  static_cast<long long>(request.request_id), request.reason.c_str(), depth,
                  by_zone.size());
      return plan_reply::success(request.request_id, std::move(plan));
    },
    [self](const availability_event& event) {
      ++self->state.events;
      std::printf("[scheduler] node %s %s%s%s\n", event.node.name.c_str(), event.kind.c_str(),
                  event.reason.empty() ? "" : ": ", event.reason.c_str());
    },
  };
}

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

int main() {
  runtime_config cfg;
  caf::actor_system system{cfg};

  coordinator_options options;
  options.supervisor.zones = {"local-a", "local-b"};
  options.supervisor.quorum = 4;
  options.supervisor.scheduler = system.spawn(zone_affine_scheduler);
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
    agent.inventory = node_inventory{name, zone, "CPU", "localhost",
                                     {{0, "cpu", 1ull << 30}, {1, "cpu", 1ull << 30}}};
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
