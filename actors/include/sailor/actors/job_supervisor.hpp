#pragma once
/// job_supervisor: admits nodes, asks the scheduler for plans, hands out roles, and re-plans
/// when capacity changes. A typed actor: supervisor_interface.hpp lists what it accepts and
/// from whom; each of its states below handles all of it.
///
///   [collecting] --join_request--> admit or refuse; quorum reached --> [planning]
///                --settle (settle time after the first join)--> [planning]
///   [planning]   --plan_reply ok--> place replicas, send role_assignment to every node,
///                     spawn a replica_group per replica --> [running] (phase "assigning")
///                --plan_reply error / placement error--> [collecting] (phase "waiting")
///                --capacity changed meanwhile--> ask again when the reply arrives
///                (the scheduler's protocol, its deadline, the built-in planner as fallback and
///                the checks of every plan: scheduler_api.hpp, supervisor_scheduler.cpp)
///   [running]    --stage_ready--> counted; every replica_group complete --> phase "running"
///                --join_request--> admit --> [planning] (grow): the ranks train on while
///                     the plan is made; then they stop, keep their state in memory, and the
///                     plan that takes it from them is assigned (supervisor_recovery.cpp)
///   any state    --node_lost / endpoint down / preemption_notice--> drop the node, tell the
///                     scheduler; in [running] --> [planning] over what remains
///
/// Training (options.prepare_training): each plan gets a training_job; a plan made after a
/// loss resumes from the last complete checkpoint (the job's start_iteration, filled by
/// prepare_training), and the iterations completed before it are kept, so the loss curve runs
/// on across re-plans.
///                --status_request--> cluster_status
///
/// Start-up of a plan: no wait without a deadline. After the assignment, each step has one:
///
///   assignment --every role ready--> setup --every rank's communicators and model made-->
///   restore (a resumed plan: every rank restored) --> first iteration --every rank
///   reported it--> running
///
/// A node that misses a step's deadline is dropped (named, with the step, in the log, the
/// events and the status) and the job re-planned without it. When every node of the plan
/// missed it (there is no telling who held the others up), the same nodes get one more try,
/// then the job fails clearly. A rank that fails its start-up says where: a peer it cannot
/// reach at its advertised address is dropped; a checkpoint it cannot restore (corrupt, gone)
/// is forgotten and the job re-planned from an older complete one. Checkpoint writes that
/// fail are told in the events and the status while training goes on.
///
/// Numerical guards: an iteration whose loss or gradient norm is not finite fails on every
/// rank before its step (report_kind::diverged); the job goes back to the newest checkpoint
/// whose values restore finite (a restore that finds a NaN or an infinity is refused like a
/// corrupt one), never to the ranks' memory, which led to it. Reaching that iteration (or an
/// earlier one) not finite again fails the job, naming the iteration.
///
/// Every admitted node is monitored (its endpoint's death is a down_msg) and watched by the
/// zone_coordinator of its zone (missed heartbeats). The supervisor spawns one zone
/// coordinator per zone of the cluster.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/node_agent_interface.hpp"
#include "sailor/actors/replica_group.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/actors/scheduler_session.hpp"
#include "sailor/actors/checkpoint_holdings.hpp"
#include "sailor/actors/status_board.hpp"
#include "sailor/actors/supervisor_interface.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/actors/zone_coordinator.hpp"

namespace sailor::train {
class checkpoint_keeper;
}

namespace sailor::actors {

/// One recovery of a training job whose plan changed while it ran: from a node lost (or its
/// notice), or a plan made while every rank still trained (a node joined, a drift re-plan),
/// to the next plan's first completed iteration (supervisor_recovery.cpp). Seconds.
struct recovery_record {
  std::string cause;              ///< "loss" (a notice too), "replan" (the ranks were stopped)
                                  ///< or "non_finite" (an iteration was not finite)
  std::int64_t plan_version = 0;  ///< the plan that resumed
  int start_iteration = 0;        ///< where it resumed (completed iterations kept)
  int lost_iterations = 0;        ///< iterations completed before the loss and run again
  std::string state_source;       ///< replicas (survivors' memory), checkpoint (disk), none
  std::int64_t bytes_restored = 0;  ///< state fetched over the transport by the plan's nodes
  double planning_s = 0;  ///< noticed -> plan assigned (survivors' state, planning; for a
                          ///< re-plan: the ranks stopped -> assigned, the planning ran before)
  double setup_s = 0;     ///< assigned -> every rank set up (rendezvous, communicators)
  double restore_s = 0;   ///< set up -> every rank restored (state transfer and load)
  double first_iteration_s = 0;  ///< restored -> first iteration completed
  double total_s = 0;            ///< noticed -> first iteration completed
};

/// A job this supervisor takes over from an earlier coordinator process of it (read from the
/// coordinator's journal, job_journal.hpp).
struct resumed_job {
  std::int64_t plan_version = 0;  ///< the newest plan version issued: the next is one more
  /// The iterations it completed: kept, except those after the point the first plan resumes
  /// from, which are run again (and counted once).
  std::vector<iteration_record> completed;
  std::optional<double> initial_val_loss;
};

struct supervisor_options {
  std::vector<std::string> zones;  ///< zones of the cluster; a node of another zone is refused
  int quorum = 0;                  ///< plan as soon as this many nodes joined (0: settle only)
  caf::timespan settle = std::chrono::seconds{2};  ///< plan this long after the first join
  caf::timespan heartbeat_interval = std::chrono::milliseconds{500};
  caf::timespan heartbeat_timeout = std::chrono::milliseconds{2000};
  caf::timespan plan_timeout = std::chrono::seconds{60};
  /// planner_actor or a user's scheduler (scheduler_api.hpp; adapt_scheduler for a plain actor)
  scheduler_actor scheduler;
  /// The rendezvous store (rendezvous.hpp): told the nodes of each plan it assigns
  /// (store_scope). Empty: none.
  caf::actor store;
  /// Makes an actor reachable by peers (bridge::publish); used for the zone coordinators.
  std::function<void(const std::string&, const caf::actor&)> publish;
  std::size_t max_events = 64;
  /// What this supervisor does besides planning, in one line (e.g. that it trains nothing);
  /// the first event, so that `sailor status` says it. Empty: none.
  std::string mode_note;
  /// Training: when set, called for each new plan with a training_job holding the plan and
  /// its version, and the checkpoints the nodes still in the job hold; it fills the rest
  /// (model, iterations, where to resume from...) and returns true to train. The job goes to
  /// every node with roles, before its role_assignment.
  std::function<bool(training_job&, const checkpoint_holdings&)> prepare_training;
  /// Called (in the supervisor) when every rank has reported an iteration.
  std::function<void(const iteration_record&, const training_progress&)> on_iteration;
  /// Called (in the supervisor) when a rank reports that training failed and no node was
  /// lost within `training_failure_grace` (the peers of a lost node usually fail before the
  /// loss is noticed; the re-plan then resumes training and the failure is forgotten).
  std::function<void(const std::string&)> on_training_error;
  caf::timespan training_failure_grace = std::chrono::seconds{5};
  /// Bound on the assignment of a plan: every role's stage actor ready.
  caf::timespan assignment_deadline = std::chrono::seconds{60};
  /// Bound on each later start-up step of a training plan: set-up (reaching the peers, the
  /// rendezvous, the model), restore, and the first iteration.
  caf::timespan startup_deadline = std::chrono::seconds{120};
  /// When set, the supervisor publishes its state, events and training reports here (for the
  /// dashboard), at every event and iteration and at least every `board_interval`.
  std::shared_ptr<status_board> board;
  /// When set (`sailor coordinator --keep-checkpoints`), every checkpoint file a node reports
  /// is fetched into the keeper too, which then counts as a holder that is never lost: a
  /// checkpoint outlives every node of the job (spot capacity gone all at once).
  std::shared_ptr<train::checkpoint_keeper> keeper;
  caf::timespan board_interval = std::chrono::milliseconds{200};
  /// The built-in planner: decides when `scheduler` does not answer within plan_timeout or
  /// its plan is refused, and is offered to `scheduler` for candidates. Empty: none.
  scheduler_actor builtin;
  /// The model's layer count (embedding and head included): a plan must cover exactly
  /// these. 0: unknown (the stages must still be contiguous from layer 0).
  int model_layers = 0;
  /// Recovery (supervisor_recovery.cpp): after a node is lost during training, the next
  /// plan waits up to this long for the surviving ranks to report the state they keep in
  /// memory, then resumes from the newest state every layer of which is held.
  caf::timespan state_wait = std::chrono::seconds{5};
  /// Called (in the supervisor) when a recovered plan completed its first iteration.
  std::function<void(const recovery_record&)> on_recovery;
  /// Called (in the supervisor) for each node admitted, with the actor its messages go to
  /// (its agent): `sailor coordinator` asks nodes to probe their links through it.
  std::function<void(const node_inventory&, const caf::actor&)> on_admitted;
  /// Called (in the supervisor) when the plan's checkpoint that outlives any one stage
  /// advances (the writers are told to keep it): the coordinator's journal records it.
  std::function<void(const checkpoint_kept&)> on_checkpoint_kept;
  /// Refuse a node whose join claims a plan version this supervisor (with what it took over
  /// in `resumed`) never issued: the coordinator keeps a journal, so every plan version of
  /// the job is known, and such a node ran another job or another coordinator's plan.
  bool refuse_unknown_plans = false;
  /// Set: this supervisor continues a job an earlier coordinator process ran (it was killed,
  /// or restarted). Its plans number on, its loss curve runs on, and the first plan's first
  /// iteration closes a recovery record of cause "coordinator_restart", counted from the
  /// supervisor's start.
  std::optional<resumed_job> resumed;
};

/// A node preempted with notice that stays until the next plan took its state.
struct leaving_node {
  node_agent_actor endpoint;
  std::string address;  ///< its shard server
  int ranks = 0;        ///< of the ended plan
};

/// The supervisor's record of a recovery in progress (supervisor_recovery.cpp).
struct recovery_progress {
  bool active = false;    ///< between a loss (or a re-plan) during training and the next
                          ///< plan's first iteration
  bool waiting = false;   ///< for the survivors' state reports
  std::string cause;      ///< recovery_record::cause
  std::int64_t ended_version = 0;  ///< the plan whose ranks report their state
  int expected = 0, received = 0;
  std::int64_t serial = 0;              ///< of the wait's deadline timer
  std::optional<plan_reply> held;       ///< the next plan, held until the state is in
  caf::actor_clock::time_point noticed{}, assigned{}, set_up{}, restored{};
  recovery_record record;
  std::map<std::string, leaving_node> leaving;
};

/// What the supervisor is doing (supervisor_interface.hpp's state diagram; `sailor status`
/// prints its to_string as the phase): collecting nodes (quorum or settle time), planning,
/// assigning a plan's roles, running it, or waiting for capacity (nodes are there, no plan
/// fits them).
enum class supervisor_phase { collecting, planning, assigning, running, waiting };

inline const char* to_string(supervisor_phase p) {
  switch (p) {
    case supervisor_phase::collecting: return "collecting";
    case supervisor_phase::planning: return "planning";
    case supervisor_phase::assigning: return "assigning";
    case supervisor_phase::running: return "running";
    case supervisor_phase::waiting: return "waiting";
  }
  return "?";
}

/// Where a node stands with the current plan (`sailor status` and the dashboard print its
/// to_string): joined (no plan has placed it yet), assigned (roles, not all ready yet), idle
/// (no role in the plan), ready (every role ready).
enum class node_state { joined, assigned, idle, ready };

inline const char* to_string(node_state s) {
  switch (s) {
    case node_state::joined: return "joined";
    case node_state::assigned: return "assigned";
    case node_state::idle: return "idle";
    case node_state::ready: return "ready";
  }
  return "?";
}

struct supervised_node {
  node_inventory inventory;
  /// Where its join came from: its agent (a bridge proxy of it, when remote).
  node_agent_actor endpoint;
  node_state state = node_state::joined;
  std::vector<stage_role> roles;
  int ready_roles = 0;
  bool heard = false;
  caf::actor_clock::time_point last_heard{};
};

struct supervisor_state {
  supervisor_options options;
  std::map<std::string, supervised_node> nodes;
  std::map<std::string, zone_coordinator_actor> zones;
  supervisor_phase phase = supervisor_phase::collecting;
  bool settle_armed = false;
  std::int64_t next_request = 1;
  std::int64_t pending_request = 0;
  bool capacity_changed = false;  ///< while planning: ask again when the reply arrives
  std::string replan_reason;
  std::int64_t plan_version = 0;
  std::optional<config::plan> current;
  std::map<std::pair<int, int>, replica_group_actor> groups;
  int roles_total = 0;
  int roles_ready = 0;
  int replicas_ready = 0;
  std::string last_error;
  std::deque<std::string> events;
  std::deque<peer_refused> refusals;  ///< peers refused at the door, most recent last
  std::int64_t nodes_lost = 0;
  training_progress training;  ///< iterations of the current plan's training (if any)
  checkpoint_holdings holdings;  ///< which node holds which checkpoint shard (from reports)
  /// The start-up step the current plan is in ("assignment", "setup", "restore",
  /// "first iteration"; empty: started, or no plan) and the serial of its deadline timer.
  std::string startup_step;
  std::int64_t startup_serial = 0;
  /// The nodes of the last plan that every node of missed a step (the retry is spent).
  std::string startup_retried;
  /// Plans in a row whose ranks failed to meet (set-up: the rendezvous, the communicators)
  /// with no node lost: each is planned again over the nodes still joined, up to
  /// max_setup_retries; a plan that starts clears it.
  int setup_retries = 0;
  static constexpr int max_setup_retries = 2;
  /// The checkpoint the current plan restores (folder, iterations; 0: none).
  std::string restore_folder;
  int restore_iterations = 0;
  bool restore_mixed = false;  ///< memory for some layers, a checkpoint on disk for the rest
  /// The current plan's checkpoint folder (empty: it writes none) and the newest iteration of
  /// it complete across stages that the plan's nodes were told to keep (checkpoint_kept).
  std::string checkpoint_dir;
  int checkpoint_kept_iterations = 0;
  /// The current plan's checkpoint_every (0: it writes none).
  int checkpoint_every = 0;
  /// When the supervisor first saw each of the newest complete checkpoints of the job
  /// complete, by iterations (a few kept): the age `sailor status` shows.
  std::map<int, caf::actor_clock::time_point> checkpoint_complete_at;
  /// Checkpoint writes that fail, by node, for the current plan (told once each).
  std::map<std::string, std::string> checkpoint_failures;
  scheduler_session sched;  ///< the scheduler's rules, drains and the re-plan under way
  recovery_progress recovery;
  /// The newest iteration whose loss or gradient norm was not finite and that the job went
  /// back to a checkpoint for (-1: none): reaching it (or an earlier one) again fails the job.
  int diverged_iteration = -1;
  /// The plan whose divergence was handled (its other ranks' reports follow from it).
  std::int64_t diverged_version = 0;
  static inline const char* name = "job_supervisor";
};

supervisor_actor::behavior_type
job_supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
               supervisor_options options);

}  // namespace sailor::actors
