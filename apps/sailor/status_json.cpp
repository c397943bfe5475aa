// The JSON of a cluster status: `sailor status --json` prints it, the dashboard serves it as
// /api/status.
#include "status_json.hpp"

namespace sailor::app {

nlohmann::json status_json(const actors::cluster_status& s) {
  nlohmann::json out;
  out["phase"] = s.phase;
  out["plan_version"] = s.plan_version;
  out["quorum"] = s.quorum;
  out["stages"] = s.stages;
  out["replicas"] = s.replicas;
  out["roles_total"] = s.roles_total;
  out["roles_ready"] = s.roles_ready;
  out["all_roles_assigned"] = s.phase == "running" && s.roles_total > 0 &&
                              s.roles_ready == s.roles_total;
  out["plan"] = s.plan_summary;
  if (s.training_total > 0) {
    out["training"] = {{"completed", s.training_completed},
                       {"total", s.training_total},
                       {"loss", s.training_loss},
                       {"summary", s.training_summary}};
    // [iterations completed, validation loss] of every validation pass so far.
    auto curve = nlohmann::json::array();
    for (std::size_t k = 0; k < s.val_losses.size() && k < s.val_iterations.size(); ++k)
      curve.push_back({s.val_iterations[k], s.val_losses[k]});
    out["training"]["val_loss_curve"] = std::move(curve);
    // Only for a plan that writes checkpoints (checkpoint_every > 0).
    if (s.checkpoint_every > 0)
      out["training"]["checkpoint"] = {{"iterations", s.checkpoint_iterations},
                                       {"behind_iterations", s.checkpoint_behind},
                                       {"age_s", s.checkpoint_age_s},
                                       {"every", s.checkpoint_every},
                                       {"warning", s.checkpoint_warning}};
  }
  out["zones"] = s.zones;
  out["events"] = s.events;
  out["refusals"] = nlohmann::json::array();
  for (auto& r : s.refusals)
    out["refusals"].push_back({{"peer", r.peer}, {"reason", r.reason}, {"unix_ms", r.unix_ms}});
  out["nodes"] = nlohmann::json::array();
  for (auto& n : s.nodes) {
    nlohmann::json node;
    node["name"] = n.inventory.name;
    node["zone"] = n.inventory.zone;
    node["gpu_type"] = n.inventory.gpu_type;
    node["host"] = n.inventory.host;
    node["devices"] = n.inventory.devices.size();
    node["state"] = n.state;
    node["heartbeat_age_ms"] = n.heartbeat_age_ms;
    node["ready_roles"] = n.ready_roles;
    node["roles"] = nlohmann::json::array();
    for (auto& r : n.roles)
      node["roles"].push_back({{"stage", r.stage},
                               {"replica", r.replica},
                               {"tp_rank", r.tp_rank},
                               {"tp", r.tp},
                               {"device", r.device},
                               {"first_layer", r.first_layer},
                               {"num_layers", r.num_layers}});
    out["nodes"].push_back(std::move(node));
  }
  return out;
}

}  // namespace sailor::app
