#pragma once
// The zone-affine scheduler of the examples (custom_scheduler.cpp, zone_affine_training.cpp):
// one pipeline per zone, so that no activation crosses a zone link; data-parallel replicas of
// a stage are in different zones.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sailor/actors/scheduler_api.hpp"

namespace examples {

using namespace sailor::actors;

struct zone_affine_state {
  int events = 0;
  static inline const char* name = "zone_affine_scheduler";
};

// One pipeline per zone; a zone's pipeline has one stage per device of that zone, and stages
// of different zones with the same index are data-parallel replicas of each other. So every
// zone must offer the same number of devices; the smallest count wins.
scheduler_actor::behavior_type
zone_affine_scheduler(scheduler_actor::stateful_pointer<zone_affine_state> self) {
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
      const int model_layers = request.model_layers > 0 ? request.model_layers : 6;
      std::size_t depth = static_cast<std::size_t>(model_layers);
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
      std::printf("[scheduler] node %s %s%s%s\n", event.node.name.c_str(), to_string(event.kind),
                  event.reason.empty() ? "" : ": ", event.reason.c_str());
    },
    [](const plan_applied& x) {
      std::printf("[scheduler] plan v%lld applied (%d stages)\n",
                  static_cast<long long>(x.plan_version), x.plan.num_stages());
    },
    [](const replan_finished& x) {
      std::printf("[scheduler] plan v%lld started %.3f s after: %s\n",
                  static_cast<long long>(x.plan_version), x.recovery_s, x.reason.c_str());
    },
    [](const plan_refused& x) { std::printf("[scheduler] plan refused: %s\n", x.reason.c_str()); },
    [](const scheduler_attached&) {}, [](const iteration_telemetry&) {},
  };
}

}  // namespace examples
