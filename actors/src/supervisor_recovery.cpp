// The job supervisor's side of recovery from the survivors' memory.
//
//   a node is lost during training
//     -> the surviving ranks are released (an empty role assignment): each abandons the
//        iteration in flight (between iterations at once; inside one after a grace of 1.5
//        iterations, 0.2-2 s, when its node aborts the rank's communicators and channel)
//        and reports the state it keeps
//        in memory after its last completed iteration (report_kind::snapshot);
//     -> planning goes on meanwhile; the new plan is held until every surviving rank has
//        reported (or failed before training), at most options.state_wait;
//     -> the plan resumes from the newest state every layer of which is held: the
//        survivors' memory (checkpoints/<job>/mem) when it is complete, else the newest
//        complete checkpoint (checkpoint_holdings::newest): on the writers' disks, or the
//        copies each writer made of its shards on a node outside its stage (report phase
//        "copy"), which outlive the whole stage;
//     -> its first completed iteration closes the record (options.on_recovery).
//
//   an iteration is not finite (every rank stopped before its step, keeping no state)
//     -> as after a loss, but no rank keeps state: the plan resumes from a checkpoint;
//
//   a plan is made while every rank of the running plan still trains (a node joined: growth;
//   a drift re-plan)
//     -> the ranks trained on while it was made; now they are released as above, keep their
//        state in memory and report it, and the plan is held until they have (recovery_replan);
//     -> it resumes from their memory, every layer from the running ranks that hold it (the
//        joining nodes fetch theirs over the transport): no completed iteration is run again.

#include <algorithm>
#include <chrono>

#include "sailor/config/log.hpp"
#include "supervisor_internal.hpp"

namespace sailor::actors::supervision {
namespace {

double seconds_between(caf::actor_clock::time_point a, caf::actor_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool memory_folder(const std::string& folder) {
  return folder.size() >= 4 && folder.compare(folder.size() - 4, 4, "/mem") == 0;
}

// Whether the current plan trains and its ranks are in their iterations: only then do they
// keep state (a plan still starting up, in set-up or restore, has none to wait for).
bool in_iterations(supervisor* self) {
  auto& st = self->state;
  const bool started = st.startup_step.empty() ||
                       st.startup_step == training_progress::first_iteration_step;
  return st.training.active() && !st.training.finished() &&
         st.training.plan_version() == st.plan_version && started;
}

// The nodes that left with notice: the next plan has their state, they may go.
void release_leaving(supervisor* self, const std::string& why) {
  auto& st = self->state;
  for (auto& [name, node] : st.recovery.leaving) {
    st.holdings.forget(node.address);
    self->send(node.endpoint, shutdown_notice{why, shutdown_kind::released});
  }
  st.recovery.leaving.clear();
}

// Every surviving rank has reported: the held plan goes on.
void maybe_resume(supervisor* self) {
  auto& rec = self->state.recovery;
  if (!rec.waiting || rec.received < rec.expected)
    return;
  rec.waiting = false;
  log::get("actors")->info("[supervisor] the survivors of plan v{} reported their state ({} of {} "
                           "ranks) after {:.3f} s",
                           rec.ended_version, rec.received, rec.expected,
                           seconds_between(rec.noticed, self->clock().now()));
  if (auto held = std::move(rec.held)) {
    rec.held.reset();
    on_plan(self, std::move(*held));
  }
}

// A recovery starts now, for `cause` (the nodes leaving with notice stay listed). The serial
// of the state wait's timer runs on across recoveries: the timer of an earlier wait, still on
// its way, must not end this one.
void begin(supervisor* self, const char* cause) {
  auto& rec = self->state.recovery;
  auto leaving = std::move(rec.leaving);
  const auto serial = rec.serial;
  rec = recovery_progress{};
  rec.leaving = std::move(leaving);
  rec.serial = serial;
  rec.active = true;
  rec.cause = cause;
  rec.noticed = self->clock().now();
}

// The ranks of the current plan stop: an empty assignment of the same version releases their
// stage actors (the version stays: the next plan is the next version, as without this). Each
// keeps its state after its last completed iteration and reports it.
void release_ranks(supervisor* self) {
  auto& st = self->state;
  st.recovery.ended_version = st.plan_version;
  st.recovery.received = 0;
  for (auto& [name, node] : st.nodes)
    self->send(node.endpoint, role_assignment{st.plan_version, {}, {}});
}

// Waits (bounded by options.state_wait) for the state reports of every rank of the released
// plan still in the job; a plan held meanwhile goes on once they are in.
void await_state(supervisor* self) {
  auto& st = self->state;
  auto& rec = st.recovery;
  rec.expected = 0;
  for (auto& [name, node] : st.nodes)
    rec.expected += static_cast<int>(node.roles.size());
  for (auto& [name, node] : rec.leaving)
    rec.expected += node.ranks;
  // Nothing (more) to wait for, as when a second loss takes the last survivors: the wait
  // ends now, and a plan held meanwhile goes on (it was left held, and the supervisor stalled
  // in planning while new nodes joined).
  rec.waiting = true;
  if (rec.received >= rec.expected) {
    maybe_resume(self);
    return;
  }
  self->delayed_send(self, st.options.state_wait, recovery_wait_atom::value, ++rec.serial);
}

}  // namespace

void recovery_resume(supervisor* self) {
  auto& st = self->state;
  if (!st.options.resumed || st.options.resumed->plan_version <= 0)
    return;
  const auto& job = *st.options.resumed;
  st.plan_version = job.plan_version;
  // Not a plan of this process: inactive (no ranks), it carries what the earlier one completed
  // to the first plan, which keeps what comes before the state it resumes from.
  const int done = job.completed.empty() ? 0 : static_cast<int>(job.completed.back().iteration) + 1;
  st.training = training_progress{job.plan_version, 0, 0, 0, 0, done, job.completed};
  st.training.set_initial_val_loss(job.initial_val_loss);
  begin(self, "coordinator_restart");
  log::get("actors")->info("[supervisor] continues the job of an earlier coordinator: plan v{} "
                           "was its last, {} iterations completed",
                           job.plan_version, job.completed.size());
  record(self, "continues the job after plan v" + std::to_string(job.plan_version) + " and " +
                 std::to_string(job.completed.size()) + " completed iterations (journal)");
}

void recovery_on_loss(supervisor* self) {
  auto& st = self->state;
  auto& rec = st.recovery;
  const bool running = in_iterations(self);
  // The last node gone: the job waits for capacity (its plan already ended there), and the
  // plan that capacity brings back is this loss's recovery (state from a checkpoint the
  // coordinator keeps, or none).
  const bool last_gone = st.nodes.empty() && st.training.active() && !st.training.finished();
  if (!running && !rec.waiting && !last_gone)
    return;
  if (!rec.active)
    begin(self, "loss");
  if (running && !(rec.waiting && rec.ended_version == st.plan_version))
    release_ranks(self);
  await_state(self);
}

void recovery_on_divergence(supervisor* self) {
  auto& st = self->state;
  if (!st.recovery.active)
    begin(self, "non_finite");
  if (!(st.recovery.waiting && st.recovery.ended_version == st.plan_version))
    release_ranks(self);
  await_state(self);
}

bool recovery_replan(supervisor* self, plan_reply& reply) {
  auto& st = self->state;
  auto& rec = st.recovery;
  // Ranks already released (a loss, or this plan's own release) have nothing more to stop.
  if (!reply.ok || !in_iterations(self) || rec.ended_version == st.plan_version)
    return false;
  if (!rec.active)  // else a recovery whose plan has not completed an iteration yet goes on
    begin(self, "replan");
  log::get("actors")->info("[supervisor] plan v{} stops its ranks for the next plan: they keep "
                           "their state in memory for it",
                           st.plan_version);
  release_ranks(self);
  rec.held = std::move(reply);
  await_state(self);
  return true;
}

bool recovery_hold(supervisor* self, plan_reply& reply) {
  auto& rec = self->state.recovery;
  if (!rec.waiting || !reply.ok)
    return false;
  rec.held = std::move(reply);
  return true;
}

void recovery_deadline(supervisor* self, std::int64_t serial) {
  auto& rec = self->state.recovery;
  if (!rec.waiting || serial != rec.serial)
    return;
  log::get("actors")->warn("[supervisor] {} of {} surviving ranks of plan v{} reported their "
                           "state within {} ms: planning with what is held",
                           rec.received, rec.expected, rec.ended_version,
                           to_ms(self->state.options.state_wait));
  rec.received = rec.expected;
  maybe_resume(self);
}

bool recovery_report(supervisor* self, const train_report& x) {
  auto& rec = self->state.recovery;
  const auto kind = x.what();
  const bool gave_up = kind == report_kind::failed && x.phase != "iteration";
  if (kind != report_kind::snapshot && !gave_up)
    return false;
  if (rec.waiting && x.plan_version == rec.ended_version) {
    ++rec.received;
    maybe_resume(self);
  }
  if (kind == report_kind::snapshot && x.phase == "handover")
    log::get("actors")->info("[supervisor] {} holds {} ({} bytes), handed over by a node that "
                             "leaves", x.node, x.checkpoint_file, x.bytes);
  if (kind == report_kind::snapshot && x.phase == "copy")
    log::get("actors")->debug("[supervisor] {} holds a copy of {} ({} bytes)", x.node,
                              x.checkpoint_file, x.bytes);
  if (kind == report_kind::snapshot && !x.error.empty())
    log::get("actors")->info("[supervisor] {} rank {} keeps no state: {}", x.node, x.rank, x.error);
  return kind == report_kind::snapshot;
}

bool mixed_restore(const training_job& job) {
  return state_source(job.start_iteration, job.restore_dir, job.restore_files) == "mixed";
}

void recovery_assigned(supervisor* self, const std::vector<iteration_record>& earlier) {
  auto& st = self->state;
  auto& rec = st.recovery;
  if (!rec.active)
    return;
  rec.assigned = self->clock().now();
  rec.set_up = rec.restored = {};
  auto& r = rec.record;
  // A plan of this recovery that completed no iteration (replaced by this one) still counts
  // the iterations run again and the bytes moved for it.
  const int lost_before = r.plan_version != 0 ? r.lost_iterations : 0;
  const std::int64_t bytes_before = r.plan_version != 0 ? r.bytes_restored : 0;
  const std::string source_before = r.plan_version != 0 ? r.state_source : std::string{};
  r = recovery_record{};
  r.cause = rec.cause;
  r.bytes_restored = bytes_before;
  r.plan_version = st.plan_version;
  r.start_iteration = st.restore_iterations;
  r.lost_iterations = static_cast<int>(std::count_if(
    earlier.begin(), earlier.end(),
    [&](const iteration_record& e) { return e.iteration >= st.restore_iterations; })) + lost_before;
  r.state_source = st.restore_iterations == 0        ? "none"
                   : st.restore_mixed                 ? "mixed"
                   : memory_folder(st.restore_folder) ? "replicas"
                                                      : "checkpoint";
  // The memory of that earlier plan (it completed no iteration) holds what it restored: the
  // state came from where that plan took it (every node lost, two coming back one by one).
  if (r.state_source == "replicas" && !source_before.empty() && source_before != "none")
    r.state_source = source_before;
  r.planning_s = seconds_between(rec.noticed, rec.assigned);
  record(self, "recovery: plan v" + std::to_string(st.plan_version) + " resumes after iteration " +
                 std::to_string(r.start_iteration) + " from " +
                 state_source_words(r.state_source) +
                 "; " + std::to_string(r.lost_iterations) + " completed iterations run again");
}

void recovery_step(supervisor* self, const train_report& x) {
  auto& st = self->state;
  auto& rec = st.recovery;
  if (!rec.active || x.plan_version != st.plan_version)
    return;
  const auto now = self->clock().now();
  if (x.phase == "restore")
    rec.record.bytes_restored += x.bytes;
  if (rec.set_up == caf::actor_clock::time_point{} &&
      st.training.reached("setup") >= st.training.world())
    rec.set_up = now;
  if (rec.restored == caf::actor_clock::time_point{} &&
      st.training.reached("restore") >= st.training.world()) {
    rec.restored = now;
    release_leaving(self, "the next plan restored its state");
  }
}

void recovery_done(supervisor* self, const iteration_record& done) {
  auto& st = self->state;
  auto& rec = st.recovery;
  if (!rec.active || rec.waiting || st.training.plan_version() != st.plan_version ||
      done.iteration != st.training.start_iteration())
    return;
  const auto now = self->clock().now();
  auto& r = rec.record;
  if (rec.set_up == caf::actor_clock::time_point{})
    rec.set_up = now;
  if (rec.restored == caf::actor_clock::time_point{})
    rec.restored = rec.set_up;
  r.setup_s = seconds_between(rec.assigned, rec.set_up);
  r.restore_s = seconds_between(rec.set_up, rec.restored);
  r.first_iteration_s = seconds_between(rec.restored, now);
  r.total_s = seconds_between(rec.noticed, now);
  rec.active = false;
  release_leaving(self, "the next plan runs");
  log::get("actors")->info("[supervisor] recovered in {:.3f} s (planning {:.3f}, set-up {:.3f}, "
                           "restore {:.3f}, first iteration {:.3f}): {} bytes from {}, {} "
                           "iterations lost",
                           r.total_s, r.planning_s, r.setup_s, r.restore_s, r.first_iteration_s,
                           r.bytes_restored, r.state_source, r.lost_iterations);
  if (st.options.board)
    st.options.board->add_recovery(r.cause, r.total_s);
  if (st.options.on_recovery)
    st.options.on_recovery(r);
}

void recovery_notice(supervisor* self, const std::string& name, const std::string& reason,
                     double seconds_left) {
  auto& st = self->state;
  auto i = st.nodes.find(name);
  if (i == st.nodes.end())
    return;
  if (!in_iterations(self) || i->second.roles.empty()) {
    lose_node(self, name, reason);
    return;
  }
  st.recovery.leaving[name] = leaving_node{i->second.endpoint, i->second.inventory.address,
                                           static_cast<int>(i->second.roles.size())};
  lose_node(self, name, reason, loss_farewell::keep_state);  // A plan made after the node's grace period must not count on its shard server.
  if (seconds_left > 0 && seconds_left < 86400)
    self->delayed_send(self,
                       std::chrono::duration_cast<caf::timespan>(
                         std::chrono::duration<double>(seconds_left)),
                       leave_deadline_atom::value, name);
}

void recovery_leave_deadline(supervisor* self, const std::string& name) {
  auto& st = self->state;
  auto l = st.recovery.leaving.find(name);
  if (l == st.recovery.leaving.end())
    return;
  log::get("actors")->warn("[supervisor] node {} left with notice before the next plan took its "
                           "state: only what it handed over to nodes that stay is still held",
                           name);
  st.holdings.forget(l->second.address);
  st.recovery.leaving.erase(l);
}

void recovery_tell_leaving(supervisor* self, const std::optional<training_job>& job,
                           const role_assignment& plan) {
  for (auto& [name, node] : self->state.recovery.leaving) {
    if (job)
      self->send(node.endpoint, *job);
    self->send(node.endpoint, plan);
  }
}

std::string reporting_node_address(supervisor* self, const std::string& name) {
  auto& st = self->state;
  if (auto l = st.recovery.leaving.find(name); l != st.recovery.leaving.end()) {
    return sent_by(self, l->second.endpoint) ? l->second.address : std::string{};
  }
  if (!from_the_node(self, name, "train report"))
    return {};
  return st.nodes.at(name).inventory.address;
}

}  // namespace sailor::actors::supervision
