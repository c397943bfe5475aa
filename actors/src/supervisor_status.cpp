// The job supervisor's state as `sailor status` and the dashboard see it.
#include <cstdio>

#include "prediction_note.hpp"
#include "supervisor_internal.hpp"
#include "sailor/actors/placement.hpp"

namespace sailor::actors::supervision {

cluster_status snapshot(supervisor* self) {
  auto& st = self->state;
  cluster_status out;
  out.phase = to_string(st.phase);
  out.plan_version = st.plan_version;
  out.quorum = st.options.quorum;
  if (st.current) {
    out.stages = st.current->num_stages();
    out.plan_summary = describe_plan(*st.current);
  } else if (!st.last_error.empty()) {
    out.plan_summary = "no plan: " + st.last_error;
  }
  if (st.training.active()) {
    const auto& done = st.training.completed();
    out.training_completed = st.training.completed_count();
    out.training_total = st.training.iterations();
    out.training_loss = done.empty() ? 0 : done.back().loss;
    std::string line = st.training.finished() ? "finished: " : "training: ";
    line += std::to_string(out.training_completed) + " of " +
            std::to_string(out.training_total) + " iterations";
    if (!done.empty()) {
      char loss[32];
      std::snprintf(loss, sizeof loss, ", loss %.4f", out.training_loss);
      line += loss;
    }
    for (const auto& v : st.training.val_loss_curve()) {
      out.val_iterations.push_back(v.iteration);
      out.val_losses.push_back(v.loss);
    }
    if (!out.val_losses.empty()) {
      char val[64];
      std::snprintf(val, sizeof val, ", validation loss %.4f after iteration %lld",
                    out.val_losses.back(), static_cast<long long>(out.val_iterations.back()));
      line += val;
    }
    line += ", plan v" + std::to_string(st.training.plan_version());
    if (st.training.start_iteration() > 0) {
      const auto source = st.restore_mixed ? std::string{"mixed"}
                                           : state_source(st.training.start_iteration(),
                                                          st.restore_folder, {});
      line += " (resumed from " + state_source_words(source) + " after iteration " +
              std::to_string(st.training.start_iteration()) + ")";
    }
    // Predicted against measured, and what the last re-plan bought (prediction_note.hpp).
    out.training_summary = std::move(line) + training_notes(self) +
                           prediction_text(prediction_of_run(st.training.predicted_s(),
                                                             st.training.start_iteration(), done));
  }
  out.replicas = static_cast<int>(st.groups.size());
  out.roles_total = st.roles_total;
  out.roles_ready = st.roles_ready;
  for (auto& [zone, actor] : st.zones)
    out.zones.push_back(zone);
  auto now = self->clock().now();
  for (auto& [name, node] : st.nodes) {
    node_status ns;
    ns.inventory = node.inventory;
    ns.state = to_string(node.state);
    ns.heartbeat_age_ms = node.heard ? to_ms(now - node.last_heard) : -1;
    ns.roles = node.roles;
    ns.ready_roles = node.ready_roles;
    out.nodes.push_back(std::move(ns));
  }
  out.events.assign(st.events.begin(), st.events.end());
  out.refusals.assign(st.refusals.begin(), st.refusals.end());
  return out;
}

// The dashboard's view: what `sailor status` shows, the plan and its prediction.
void publish_board(supervisor* self) {
  auto& st = self->state;
  board_snapshot s;
  s.status = snapshot(self);
  s.plan = st.current;
  s.predicted_s = st.training.predicted_s();
  st.options.board->publish(std::move(s));
}

}  // namespace sailor::actors::supervision
