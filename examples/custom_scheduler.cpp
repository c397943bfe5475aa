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

#include <caf/all.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "in_process_nodes.hpp"
#include "zone_affine.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

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

  auto options = examples::tiny_model_coordinator({"local-a", "local-b"}, 4);
  options.supervisor.scheduler = system.spawn(examples::zone_affine_scheduler);
  auto coord = coordinator::start(system, options);
  if (!coord) {
    std::fprintf(stderr, "cannot start the coordinator: %s\n", coord.error().message.c_str());
    return 1;
  }
  auto port = (*coord)->port();

  auto nodes = examples::start_nodes(system, port,
                                     {{"a1", "local-a", "CPU", 2}, {"a2", "local-a", "CPU", 2},
                                      {"b1", "local-b", "CPU", 2}, {"b2", "local-b", "CPU", 2}});
  if (!nodes) {
    std::fprintf(stderr, "%s\n", nodes.error().message.c_str());
    return 1;
  }

  auto all_ready = [](const cluster_status& s) {
    return s.phase == "running" && s.roles_total > 0 && s.roles_ready == s.roles_total;
  };
  auto first = examples::wait_for(system, port, all_ready);
  if (!first) {
    std::fprintf(stderr, "roles were not all assigned in time\n");
    return 1;
  }
  print(*first);

  std::printf("preempting node b2\n");
  caf::anon_send(nodes->back()->agent(), preempt_atom::value);
  auto replanned = [&](const cluster_status& s) { return all_ready(s) && s.plan_version >= 2; };
  auto second = examples::wait_for(system, port, replanned);
  if (!second) {
    std::fprintf(stderr, "no new plan in time\n");
    return 1;
  }
  print(*second);
  nodes->clear();
  coord->reset();
  caf::anon_send_exit(options.supervisor.scheduler, caf::exit_reason::user_shutdown);
  return 0;
}
