// A minimal scheduler (docs/scheduler-api.md): every device holds the whole model as a replica.
#include <cstdio>
#include <string>
#include <thread>

#include "sailor/actors/runtime.hpp"

using namespace sailor::actors;

scheduler_actor::behavior_type data_parallel(scheduler_actor::pointer) {
  return {
    [](const plan_request& req) -> plan_reply {
      sailor::config::stage_plan stage{0, req.model_layers, false, {}};
      for (auto& node : req.nodes)
        for (auto& device : node.devices)
          stage.replicas.push_back({node.gpu_type, node.zone, 1, {node.name}, {device.index}});
      if (stage.replicas.empty())
        return plan_reply::failure(req.request_id, "no devices yet");
      return plan_reply::success(req.request_id, {1, 8, {stage}, {}});
    },
    [](const plan_refused& x) { std::printf("refused: %s\n", x.reason.c_str()); },
    [](const scheduler_attached&) {}, [](const availability_event&) {},
    [](const iteration_telemetry&) {}, [](const plan_applied&) {}, [](const replan_finished&) {},
  };
}

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf("usage: minimal_scheduler (no options): a coordinator with a data-parallel "
                "scheduler and two in-process nodes; prints the plan\n");
    return std::string(argv[1]) == "--help" ? 0 : 2;
  }
  runtime_config cfg;
  caf::actor_system system{cfg};
  coordinator_options options;
  options.supervisor.zones = {"local-a"};
  options.supervisor.quorum = 2;
  options.supervisor.model_layers = 6;
  options.supervisor.scheduler = system.spawn(data_parallel);
  auto coord = coordinator::start(system, options);
  if (!coord)
    return 1;
  std::vector<std::unique_ptr<node>> nodes;
  for (auto name : {"n1", "n2"}) {
    node_agent_options agent;
    agent.inventory = {name, "local-a", "CPU", "localhost", {{0, "cpu", 1ull << 30}}, "", {}};
    if (auto n = node::start(system, "127.0.0.1", (*coord)->port(), agent))
      nodes.push_back(std::move(*n));
  }
  for (int tries = 0; tries < 200; ++tries) {  // bounded: 20 s
    auto s = query_status(system, "127.0.0.1", (*coord)->port(), std::chrono::seconds{2});
    if (s && s->phase == "running") {
      std::printf("%s\n", s->plan_summary.c_str());
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  std::fprintf(stderr, "no plan ran within 20 s\n");
  return 1;
}
