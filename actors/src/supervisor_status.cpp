// The job supervisor's state as `sailor status` and the dashboard see it.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "prediction_note.hpp"
#include "supervisor_internal.hpp"
#include "sailor/actors/placement.hpp"

namespace sailor::actors::supervision {

namespace {

// The job's newest complete checkpoint: of any of its plans' folders (checkpoints/<job>/v3
// has the job's folder checkpoints/<job>/), what a re-plan would resume from.
held_checkpoint newest_of_job(const supervisor_state& st) {
  const auto slash = st.checkpoint_dir.rfind('/');
  return st.holdings.newest(slash == std::string::npos ? std::string{}
                                                       : st.checkpoint_dir.substr(0, slash + 1));
}

// How far behind training the newest complete checkpoint is, and a warning past 3 intervals:
// checkpoint writes that fail (a full disk) otherwise leave a job that looks healthy until a
// loss rewinds it to an iteration long past.
void checkpoint_age(supervisor* self, cluster_status& out) {
  auto& st = self->state;
  if (!st.training.active() || st.checkpoint_every <= 0)
    return;
  note_newest_checkpoint(self);
  const int newest = newest_of_job(st).iterations;
  out.checkpoint_every = st.checkpoint_every;
  out.checkpoint_iterations = newest;
  out.checkpoint_behind = std::max<std::int64_t>(0, out.training_completed - newest);
  if (auto at = st.checkpoint_complete_at.find(newest);
      newest > 0 && at != st.checkpoint_complete_at.end())
    out.checkpoint_age_s =
      std::chrono::duration<double>(self->clock().now() - at->second).count();
  if (out.checkpoint_behind <= 3 * static_cast<std::int64_t>(st.checkpoint_every))
    return;
  char age[48] = "";
  if (out.checkpoint_age_s >= 0)
    std::snprintf(age, sizeof age, ", complete %.0f s ago", out.checkpoint_age_s);
  out.checkpoint_warning =
    (newest > 0 ? "the newest complete checkpoint (after iteration " + std::to_string(newest) +
                    age + ") is "
                : std::string{"no checkpoint is complete yet, "}) +
    std::to_string(out.checkpoint_behind) +
    " iterations behind, more than 3 x checkpoint_every (" +
    std::to_string(st.checkpoint_every) +
    "): a loss now loses them all (do checkpoint writes fail? a full disk?)";
}

}  // namespace

void note_newest_checkpoint(supervisor* self) {
  auto& st = self->state;
  const int newest = newest_of_job(st).iterations;
  if (newest <= 0 || st.checkpoint_complete_at.count(newest))
    return;
  st.checkpoint_complete_at.emplace(newest, self->clock().now());
  while (st.checkpoint_complete_at.size() > 8)  // older ones are rarely the newest again
    st.checkpoint_complete_at.erase(st.checkpoint_complete_at.begin());
}

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
    checkpoint_age(self, out);
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
