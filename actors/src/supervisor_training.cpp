// The job supervisor's side of training: the ranks' reports, the start-up steps of a plan and
// their deadlines, and what a rank's failure leads to (see job_supervisor.hpp).

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "peer_checks.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/text.hpp"
#include "sailor/train/checkpoint_keeper.hpp"
#include "supervisor_internal.hpp"
#include "supervisor_scheduler.hpp"

namespace sailor::actors::supervision {
namespace {

constexpr const char* step_assignment = "assignment";
constexpr const char* step_setup = "setup";
constexpr const char* step_restore = "restore";

bool training(supervisor* self) {
  return self->state.training.active() &&
         self->state.training.plan_version() == self->state.plan_version;
}

// Whether every rank (role) of node `name` is through `step`.
bool node_through(supervisor* self, const std::string& step, const supervised_node& node,
                  const std::string& name) {
  const int roles = static_cast<int>(node.roles.size());
  if (step == step_assignment)
    return node.ready_roles >= roles;
  return self->state.training.reached(step, name) >= roles;
}

// Whether the current plan is through `step`.
bool step_done(supervisor* self, const std::string& step) {
  auto& st = self->state;
  if (step == step_assignment)
    return st.phase == supervisor_phase::running;
  if (step == step_restore && st.training.start_iteration() == 0)
    return true;
  return st.training.reached(step) >= st.training.world();
}

std::string next_step(supervisor* self, const std::string& step) {
  if (step == step_assignment)
    return training(self) ? step_setup : "";
  if (step == step_setup)
    return step_restore;
  if (step == step_restore)
    return training_progress::first_iteration_step;
  return "";
}

double seconds(caf::timespan t) { return static_cast<double>(to_ms(t)) / 1000.0; }

caf::timespan deadline_of(supervisor* self, const std::string& step) {
  return step == step_assignment ? self->state.options.assignment_deadline
                                 : self->state.options.startup_deadline;
}

void arm(supervisor* self, const std::string& step) {
  auto& st = self->state;
  st.startup_step = step;
  ++st.startup_serial;
  if (step.empty())
    return;
  self->delayed_send(self, deadline_of(self, step), startup_deadline_atom::value, st.plan_version,
                     st.startup_serial);
}

void fail_training(supervisor* self, const std::string& why) {
  log::get("actors")->error("[supervisor] training failed: {}", why);
  record(self, "training failed: " + why);
  if (self->state.options.on_training_error)
    self->state.options.on_training_error(why);
}

// The restore of the plan's checkpoint failed: forget that checkpoint and plan again, from an
// older complete one (or afresh when none is left).
void restore_failed(supervisor* self, const train_report& x) {
  auto& st = self->state;
  const auto version = st.plan_version;
  const auto why = detail::printable(x.error, 1024);
  log::get("actors")->warn("[supervisor] plan v{}: {} rank {} could not restore the checkpoint "
                           "after iteration {} ({}): {}; falling back to an older checkpoint",
                           version, x.node, x.rank, st.restore_iterations, st.restore_folder, why);
  record(self, "plan v" + std::to_string(version) + ": restoring the checkpoint after iteration " +
                 std::to_string(st.restore_iterations) + " failed on " + x.node + " (" + why +
                 "); re-planning from an older checkpoint");
  st.holdings.mark_bad(st.restore_folder, st.restore_iterations);
  start_planning(self, "the checkpoint after iteration " + std::to_string(st.restore_iterations) +
                         " could not be restored");
}

// The current plan missed start-up step `step`: the nodes that are not through it are
// dropped; when that is every node of the plan, they get one more try, then the job fails.
void missed(supervisor* self, const std::string& step) {
  auto& st = self->state;
  std::vector<std::string> late, all;
  for (auto& [name, node] : st.nodes) {
    if (node.roles.empty())
      continue;
    all.push_back(name);
    if (!node_through(self, step, node, name))
      late.push_back(name);
  }
  std::string names;
  for (auto& n : late)
    names += (names.empty() ? "" : ", ") + n;
  const auto what = "the " + step + " deadline of plan v" + std::to_string(st.plan_version) +
                    " (" + fmt::format("{:.0f}", seconds(deadline_of(self, step))) + " s)";
  if (late.empty())
    return;  // a report and the timer crossed
  if (late.size() < all.size()) {
    log::get("actors")->warn("[supervisor] {} missed {}: re-planning without {}",
                             count_of(static_cast<long long>(late.size()), "node"), what,
                             late.size() == 1 ? "it" : "them");
    for (auto& name : late)
      lose_node(self, name, "missed " + what);
    return;
  }
  // Every node is late: nobody can be told apart from who held the others up.
  if (st.startup_retried != names) {
    st.startup_retried = names;
    log::get("actors")->warn("[supervisor] every node of the plan ({}) missed {}: trying them "
                             "once more",
                             names, what);
    record(self, "every node of plan v" + std::to_string(st.plan_version) + " (" + names +
                   ") missed " + what + "; trying once more");
    start_planning(self, "every node missed " + what);
    return;
  }
  st.last_error = "every node (" + names + ") missed " + what + " twice";
  if (training(self)) {
    fail_training(self, st.last_error);
    return;
  }
  log::get("actors")->error("[supervisor] {}", st.last_error);
  record(self, st.last_error);
  for (auto& name : late)
    lose_node(self, name, "missed " + what);
}

// An iteration of the current plan was not finite: every rank stopped before its step and
// keeps no state (its state led to it). The job goes back to the newest complete checkpoint
// (one whose values are not finite is refused at its restore, for an older one); reaching
// that iteration, or an earlier one, not finite again fails the job.
void diverged(supervisor* self, const train_report& x) {
  auto& st = self->state;
  if (x.plan_version != st.plan_version || !training(self) ||
      st.diverged_version == st.plan_version)
    return;  // the first rank's report decides; the others say the same
  st.diverged_version = st.plan_version;
  const auto iteration = static_cast<int>(x.iteration);
  const auto what = "iteration " + std::to_string(iteration + 1) + " (" + x.node + " rank " +
                    std::to_string(x.rank) + ": " + detail::printable(x.error, 512) + ")";
  if (st.diverged_iteration >= iteration) {
    const auto from = st.restore_iterations > 0
                        ? "the checkpoint after iteration " + std::to_string(st.restore_iterations)
                        : std::string{"the start"};
    st.last_error = what + " is not finite again after going back to " + from +
                    ": the job cannot get past it";
    fail_training(self, st.last_error);
    return;
  }
  st.diverged_iteration = iteration;
  log::get("actors")->warn("[supervisor] plan v{}: {} is not finite: going back to the newest "
                           "checkpoint",
                           st.plan_version, what);
  record(self, "plan v" + std::to_string(st.plan_version) + ": " + what +
                 " is not finite; going back to the newest checkpoint");
  recovery_on_divergence(self);
  start_planning(self, what + " is not finite");
}

void checkpoint_failed(supervisor* self, const train_report& x) {
  auto& st = self->state;
  auto& told = st.checkpoint_failures[x.node];
  const auto why = detail::printable(x.error, 512);
  if (told == why)
    return;
  const bool first = told.empty();
  told = why;
  if (!first)
    return;
  const auto newest = st.holdings.newest().iterations;
  log::get("actors")->warn("[supervisor] checkpoint writes fail on node {}: {} (training goes "
                           "on; the newest complete checkpoint is after iteration {})",
                           x.node, why, newest);
  record(self, "checkpoint writes fail on node " + x.node + ": " + why +
                 "; training goes on (newest complete checkpoint: after iteration " +
                 std::to_string(newest) + ")");
}

void failed(supervisor* self, const train_report& x) {
  auto& st = self->state;
  if (x.plan_version != st.plan_version || !training(self))
    return;
  bool had_error = !st.training.error().empty();
  st.training.add(x);
  if (had_error)
    return;  // the first failure decides; the others follow from it
  // A peer this rank could not reach (in set-up, or a holder of the state it restores, as when
  // a holder dies during the transfer and its peers notice first): the plan goes on without
  // that node, from the state the others hold, which is not bad.
  if (!x.blamed_node.empty() && x.blamed_node != x.node && st.nodes.count(x.blamed_node)) {
    const auto why = detail::printable(x.error, 1024);
    record(self, "plan v" + std::to_string(st.plan_version) + " " + x.phase + ": " + why);
    lose_node(self, x.blamed_node, "unreachable by its peers: " + why);
    return;
  }
  if (x.phase == step_restore && st.restore_iterations > 0) {
    restore_failed(self, x);
    return;
  }
  log::get("actors")->info("[supervisor] a rank failed: {} (a failure unless a node is lost "
                           "within {} ms)",
                           st.training.error(), to_ms(st.options.training_failure_grace));
  self->delayed_send(self, st.options.training_failure_grace, train_check_atom::value,
                     st.training.plan_version());
}

// The newest iteration of `folder` complete among the holders other than `gone` (0: none).
int newest_without(const checkpoint_holdings& held, const std::string& folder,
                   const std::set<std::string>& gone) {
  auto rest = held;
  for (const auto& address : gone)
    rest.forget(address);
  const auto newest = rest.newest(folder);
  return newest.folder == folder ? newest.iterations : 0;  // not a folder it is a prefix of
}

// The newest checkpoint of the running plan that a loss of any one whole stage leaves
// complete: what the job resumes from when a stage is lost without notice. The copies of each
// stage's shards on other stages lag behind the writers, so it is often older than the newest
// one every writer has written. 0: none yet (or a plan of one stage: no copy outlives it).
int newest_surviving_a_stage(supervisor* self) {
  auto& st = self->state;
  std::map<int, std::set<std::string>> stages;  // stage -> addresses of its nodes
  for (const auto& [name, node] : st.nodes)
    for (const auto& role : node.roles)
      stages[role.stage].insert(node.inventory.address);
  if (stages.size() < 2)
    return 0;
  int out = newest_without(st.holdings, st.checkpoint_dir, {});
  for (const auto& [stage, addresses] : stages)
    out = std::min(out, newest_without(st.holdings, st.checkpoint_dir, addresses));
  return out;
}

// When that checkpoint advances, every node of the plan is told: its writers keep their
// shards of it and of every newer iteration, whatever their count.
void tell_checkpoint_kept(supervisor* self) {
  auto& st = self->state;
  if (st.checkpoint_dir.empty() || !training(self))
    return;
  const int newest = newest_surviving_a_stage(self);
  if (newest <= st.checkpoint_kept_iterations)
    return;
  st.checkpoint_kept_iterations = newest;
  log::get("actors")->debug("[supervisor] plan v{}: the checkpoint after iteration {} outlives "
                            "any one stage; its writers keep it",
                            st.plan_version, newest);
  const checkpoint_kept kept{st.plan_version, newest, st.checkpoint_dir};
  if (st.options.on_checkpoint_kept)
    st.options.on_checkpoint_kept(kept);
  for (auto& [name, node] : st.nodes)
    if (!node.roles.empty())
      self->send(node.endpoint, kept);
}

}  // namespace

void announce_iteration(supervisor* self, const iteration_record& done) {
  auto& st = self->state;
  // Debug: the application prints one line per iteration (on_iteration); numbered from 1
  // as there, and without a prediction when the plan came with none.
  std::string predicted;
  if (st.training.predicted_s() > 0)
    predicted = fmt::format(", predicted {:.3f} s", st.training.predicted_s());
  log::get("actors")->debug("[supervisor] iteration {}/{}: loss {:.4f}, measured {:.3f} s{} "
                            "(compute {:.3f}, recv wait {:.3f}, send wait {:.3f}, all-reduce "
                            "{:.3f})",
                            done.iteration + 1, st.training.iterations(), done.loss,
                            done.measured_s, predicted, done.compute_s, done.recv_wait_s,
                            done.send_wait_s, done.all_reduce_s);
  if (st.options.board) {
    st.options.board->add_iteration(done, st.training.plan_version(), st.training.predicted_s());
    publish_board(self);
  }
  if (st.training.finished())
    record(self, "training finished: " + std::to_string(st.training.completed_count()) +
                   " iterations of plan v" + std::to_string(st.training.plan_version()));
  if (st.options.on_iteration)
    st.options.on_iteration(done, st.training);
}

void checkpoint_held(supervisor* self, const std::string& file, const std::string& holder) {
  auto& st = self->state;
  st.holdings.add(file, holder);
  note_newest_checkpoint(self);
  tell_checkpoint_kept(self);
  // The newest 2 complete ones, and the one the writers keep (checkpoint_kept) and newer:
  // each writer keeps no more than that of its own on its disk.
  st.holdings.keep_newest(2, st.checkpoint_kept_iterations);
}

void attach_keeper(supervisor* self) {
  if (!self->state.options.keeper)
    return;
  // Weak: the keeper lives in the supervisor's options, and outlives it at shutdown.
  caf::weak_actor_ptr weak = self->ctrl();
  self->state.options.keeper->on_kept([weak](const std::string& file, const std::string& keeper) {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<supervisor_actor>(strong), keeper_holds_atom::value, file,
                     keeper);
  });
}

void on_train_report(supervisor* self, const train_report& x) {
  auto& st = self->state;
  const auto address = reporting_node_address(self, x.node);
  if (address.empty())
    return;
  // The state a rank keeps when its plan ended on an iteration that was not finite is what
  // led to it: never resumed from (its ranks keep none; this for any that says otherwise).
  const bool led_to_non_finite = x.what() == report_kind::snapshot && x.phase.empty() &&
                                 x.plan_version == st.diverged_version;
  if (!x.checkpoint_file.empty() && !led_to_non_finite) {
    checkpoint_held(self, x.checkpoint_file, address);
    if (st.options.keeper)
      st.options.keeper->keep(x.checkpoint_file, address);
  }
  if (recovery_report(self, x))
    return;
  switch (x.what()) {
    case report_kind::failed:
      failed(self, x);
      return;
    case report_kind::diverged:
      diverged(self, x);
      return;
    case report_kind::checkpoint_failed:
      if (x.plan_version == st.plan_version)
        checkpoint_failed(self, x);
      return;
    case report_kind::reached:
      st.training.add(x);
      if (x.plan_version == st.plan_version) {
        recovery_step(self, x);
        startup_advance(self);
      }
      return;
    case report_kind::iteration:
      break;
    default:
      return;
  }
  if (st.options.board)
    st.options.board->add_report(x);
  auto done = st.training.add(x);
  if (x.plan_version == st.plan_version && !st.startup_step.empty())
    startup_advance(self);
  if (!done)
    return;
  recovery_done(self, *done);
  announce_iteration(self, *done);
}

void on_train_check(supervisor* self, std::int64_t version) {
  // A rank of plan `version` failed a grace time ago: if that plan still runs, no node loss
  // explained the failure. A re-plan still being made (a loss noticed, the next plan not
  // yet assigned: on a loaded machine, profiling it can outlast the grace) explains it too.
  auto& st = self->state;
  if (st.training.plan_version() != version || st.training.error().empty() ||
      st.phase == supervisor_phase::planning || st.plan_version != version)
    return;
  // Ranks that could not meet (a rendezvous refused or cut by a stray connection, a peer that
  // did not answer in set-up) say nothing against the nodes: plan again over the nodes still
  // joined, a bounded count of times in a row.
  if (st.training.failure().phase == step_setup && st.setup_retries < st.max_setup_retries) {
    ++st.setup_retries;
    const auto why = st.training.error();
    log::get("actors")->warn("[supervisor] plan v{} could not start: {}: planning again over "
                             "the nodes still joined (try {} of {})",
                             version, why, st.setup_retries, st.max_setup_retries);
    record(self, "plan v" + std::to_string(version) + " could not start: " + why +
                   "; planning again over the nodes still joined (try " +
                   std::to_string(st.setup_retries) + " of " +
                   std::to_string(st.max_setup_retries) + ")");
    start_planning(self, "plan v" + std::to_string(version) + "'s ranks could not meet");
    return;
  }
  fail_training(self, st.training.error());
}

void startup_begin(supervisor* self) {
  arm(self, step_assignment);
  startup_advance(self);
}

void startup_advance(supervisor* self) {
  auto& st = self->state;
  auto step = st.startup_step;
  if (step.empty())
    return;
  while (!step.empty() && step_done(self, step))
    step = next_step(self, step);
  if (step == st.startup_step)
    return;
  if (step.empty()) {
    st.startup_retried.clear();
    st.setup_retries = 0;
    log::get("actors")->info("[supervisor] plan v{} started", st.plan_version);
  }
  arm(self, step);
  if (step.empty())
    tell_plan_started(self);  // supervisor_scheduler.cpp
}

void on_startup_deadline(supervisor* self, std::int64_t version, std::int64_t serial) {
  auto& st = self->state;
  if (version != st.plan_version || serial != st.startup_serial || st.startup_step.empty() ||
      st.phase == supervisor_phase::planning)
    return;
  if (st.startup_step != step_assignment && !training(self))
    return;
  missed(self, st.startup_step);
}

std::string training_notes(supervisor* self) {
  auto& st = self->state;
  std::string out;
  if (!st.startup_step.empty() && st.startup_step != step_assignment)
    out += "; starting: " + st.startup_step;
  for (auto& [node, why] : st.checkpoint_failures)
    out += "; checkpoint writes fail on " + node + ": " + why;
  return out;
}

}  // namespace sailor::actors::supervision
