#pragma once
/// What the job supervisor accepts, as a typed actor interface, by who sends it:
///
///   node agents (over the bridge) --join_request, heartbeat, preemption_notice,
///                                   stage_ready, stage_failed, train_report--> (node port)
///   its scheduler                 --replan_now, drain_node, evict_node, placement_rule,
///                                   objective_change--> scheduler_answer (supervisor_port)
///   `sailor status`, the apps     --status_request--> cluster_status
///   zone coordinators             --zone_heartbeats, node_lost-->
///   replica groups                --replica_ready-->
///   the bridge (refusals)         --peer_refused-->
///   the drift loop                --drift_replan_atom(why), loop_note_atom(text)-->
///   itself (timers)               --settle, train check, board tick, state wait,
///                                   leave, start-up and drain deadlines-->
///
///   [collecting] --quorum or settle--> [planning] --plan assigned--> [running]
///        ^                              |      ^                         |
///        +--- no plan, no nodes left ---+      +--- capacity changed ----+
///
/// Every state handles the whole interface: what a state does not act on (a stage_ready of
/// an old plan, a settle timer after planning started) is dropped. job_supervisor.hpp says
/// what each state does. Plan replies are not in it: they come back as the answers to the
/// supervisor's own requests to the scheduler.

#include <cstdint>
#include <string>

#include <caf/typed_actor.hpp>

#include "sailor/actors/loop_note.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/actors/train_messages.hpp"

namespace sailor::actors {

// The supervisor's own timers (it sends them to itself; nobody else has a reason to).
/// Publish the dashboard's view again.
using board_tick_atom = caf::atom_constant<caf::atom("brdtick")>;
/// The wait for the survivors' state is over: (serial of the timer).
using recovery_wait_atom = caf::atom_constant<caf::atom("recwait")>;
/// The grace period of a node that left with notice is over: (node name).
using leave_deadline_atom = caf::atom_constant<caf::atom("leavedl")>;
/// A start-up step's deadline: (plan version, serial of the timer).
using startup_deadline_atom = caf::atom_constant<caf::atom("stdeadln")>;
/// A drained node's deadline: (node name).
using drain_deadline_atom = caf::atom_constant<caf::atom("draindl")>;
// The coordinator's checkpoint keeper (train/checkpoint_keeper.hpp) holds a file now: its
// path and the keeper's address, from the keeper's thread.
using keeper_holds_atom = caf::atom_constant<caf::atom("keptckpt")>;

/// What a node agent sends the supervisor: protocol messages only, so that a bridge proxy of
/// the coordinator's "supervisor" carries every one of them.
using supervisor_node_port =
  caf::typed_actor<caf::reacts_to<join_request>, caf::reacts_to<heartbeat>,
                   caf::reacts_to<preemption_notice>, caf::reacts_to<stage_ready>,
                   caf::reacts_to<stage_failed>, caf::reacts_to<train_report>>;

/// The job supervisor (job_supervisor.hpp). Its node port and its scheduler port
/// (scheduler_api.hpp) are subsets a handle converts to.
using supervisor_actor = supervisor_node_port::extend_with<supervisor_port>::extend<
  caf::replies_to<status_request>::with<cluster_status>, caf::reacts_to<zone_heartbeats>,
  caf::reacts_to<node_lost>, caf::reacts_to<replica_ready>, caf::reacts_to<peer_refused>,
  caf::reacts_to<drift_replan_atom, std::string>, caf::reacts_to<loop_note_atom, std::string>,
  caf::reacts_to<settle_atom>, caf::reacts_to<train_check_atom, std::int64_t>,
  caf::reacts_to<board_tick_atom>, caf::reacts_to<recovery_wait_atom, std::int64_t>,
  caf::reacts_to<leave_deadline_atom, std::string>,
  caf::reacts_to<startup_deadline_atom, std::int64_t, std::int64_t>,
  caf::reacts_to<drain_deadline_atom, std::string>,
  caf::reacts_to<keeper_holds_atom, std::string, std::string>>;

}  // namespace sailor::actors
