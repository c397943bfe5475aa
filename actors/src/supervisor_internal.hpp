#pragma once
// Private to the job supervisor: what its files share. job_supervisor.cpp holds the
// states (collecting, planning, running), admission and assignment; supervisor_status.cpp
// the status and the dashboard's view; supervisor_training.cpp the training reports, the
// start-up steps of a plan with their deadlines, and what a rank's failure leads to.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "sailor/actors/job_supervisor.hpp"

namespace sailor::actors::supervision {

using supervisor = supervisor_actor::stateful_base<supervisor_state>;

/// To an actor the supervisor was given that is dynamically typed (the rendezvous store). A
/// typed actor's send() takes typed receivers only; sent as the supervisor all the same.
template <class... Ts>
void tell(supervisor* self, const caf::actor& to, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), to, std::forward<Ts>(xs)...);
}

/// Whether the message being handled came from `endpoint` (a node's agent).
inline bool sent_by(supervisor* self, const node_agent_actor& endpoint) {
  const auto& sender = self->current_sender();
  return sender && sender == caf::actor_cast<caf::strong_actor_ptr>(endpoint);
}

inline std::int64_t to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

// job_supervisor.cpp
void record(supervisor* self, std::string event);
/// What a lost node is told.
enum class loss_farewell {
  release,     ///< to shut down (it failed, or was evicted)
  rejoin,      ///< that it was declared lost (silent past the heartbeat timeout, maybe only
               ///< stalled): it stops its roles and joins again as a new member
  keep_state,  ///< nothing: it leaves with notice and stays (its state held, its reports
               ///< heard) until the next plan took its state (supervisor_recovery.cpp)
};
void lose_node(supervisor* self, const std::string& name, const std::string& reason,
               loss_farewell farewell = loss_farewell::release);
/// What every node that leaves the job (lost or let go; already taken out of the nodes) is
/// owed: no longer monitored nor watched by its zone, the scheduler told it is lost (`why`).
/// With a `farewell`, what it held is forgotten and it is told to shut down with that reason
/// (`kind`: let go, or declared lost, which it answers by joining again as a new member);
/// without, it keeps its state (a node leaving with notice).
void release_node(supervisor* self, const supervised_node& node, const std::string& why,
                  const std::string& farewell, shutdown_kind kind = shutdown_kind::released);
void start_planning(supervisor* self, std::string reason);
bool from_the_node(supervisor* self, const std::string& name, const char* what);
void on_plan(supervisor* self, plan_reply reply);

// supervisor_status.cpp
/// What `sailor status` shows.
cluster_status snapshot(supervisor* self);
/// Notes when the job's newest complete checkpoint was first seen complete (its age).
void note_newest_checkpoint(supervisor* self);
/// The dashboard's view: the status, the plan and its prediction.
void publish_board(supervisor* self);

// supervisor_training.cpp
void on_train_report(supervisor* self, const train_report& x);
/// `holder` (a node's shard server, or the keeper's) holds checkpoint file `file`.
void checkpoint_held(supervisor* self, const std::string& file, const std::string& holder);
/// Has the keeper (options.keeper, if any) tell this supervisor of each file it holds.
void attach_keeper(supervisor* self);
/// A rank of plan `version` failed a grace time ago (train_check_atom).
void on_train_check(supervisor* self, std::int64_t version);
/// A new plan was assigned: its start-up begins with the assignment step.
void startup_begin(supervisor* self);
/// Moves the start-up on past every step already done, arming the next step's deadline.
void startup_advance(supervisor* self);
void on_startup_deadline(supervisor* self, std::int64_t version, std::int64_t serial);
/// Text for the status line: a start-up step in progress, failing checkpoint writes.
std::string training_notes(supervisor* self);

// supervisor_recovery.cpp: recovery from the survivors' memory.
/// At the start: the job of options.resumed is taken over (plan versions, iterations).
void recovery_resume(supervisor* self);
/// A node was lost (already removed from the nodes): while training, the surviving ranks
/// are released and the next plan waits for the state they keep.
void recovery_on_loss(supervisor* self);
/// An iteration of the current plan was not finite (its ranks stopped by themselves): they
/// are released, and the next plan waits for their reports that they keep no state.
void recovery_on_divergence(supervisor* self);
/// Whether the plan `reply` is held until the survivors' state is in (taken then).
bool recovery_hold(supervisor* self, plan_reply& reply);
/// A plan made while the current plan's ranks still train (growth, drift): they are released,
/// and `reply` is held (taken) until they reported the state they keep. False when there is
/// nothing to stop (no plan in its iterations, or its ranks already released).
bool recovery_replan(supervisor* self, plan_reply& reply);
void recovery_deadline(supervisor* self, std::int64_t serial);
/// Counts a survivor's state report (or its failure before training); true for a state
/// report (nothing more to do with it).
bool recovery_report(supervisor* self, const train_report& x);
/// The plan after a loss was assigned (its restore folder and iteration set).
void recovery_assigned(supervisor* self, const std::vector<iteration_record>& earlier);
/// Whether `job` restores some layers from the survivors' memory (its restore_dir) and others
/// from a checkpoint on disk (files outside that folder): state_source "mixed".
bool mixed_restore(const training_job& job);
/// A start-up step reached by a rank of the current plan.
void recovery_step(supervisor* self, const train_report& x);
/// An iteration completed (or settled): logged, on the board, told to on_iteration.
void announce_iteration(supervisor* self, const iteration_record& done);
/// An iteration completed: the first of a recovered plan closes its record.
void recovery_done(supervisor* self, const iteration_record& done);
/// A preemption notice from node `name`: while training, it stays until the next plan took
/// its state; otherwise it is lost at once.
void recovery_notice(supervisor* self, const std::string& name, const std::string& reason,
                     double seconds_left = 0);
/// The grace period of node `name` (a notice's seconds_left) is over: it is gone, and so is
/// what only it held (the shards it handed over to nodes that stay are still held).
void recovery_leave_deadline(supervisor* self, const std::string& name);
/// The nodes leaving with notice take no role in a new plan but serve their state to its
/// ranks: they are told of it (`job`, when it trains, and an assignment without roles), so
/// that their shard servers know its nodes.
void recovery_tell_leaving(supervisor* self, const std::optional<training_job>& job,
                           const role_assignment& plan);
/// The shard server address of node `name` when the current sender is that node, still in
/// the job or leaving with notice; empty otherwise.
std::string reporting_node_address(supervisor* self, const std::string& name);

}  // namespace sailor::actors::supervision
