#pragma once
/// node_agent: one per sailor-node process; joins the job and runs the node's stage actors.
///
///   [joining] --start (local)--> join_request to the supervisor
///   [joining] --join_accepted--> heartbeats start --> [member]
///   [joining] --join_refused--> quit (outcome: refused, with the reason)
///   [member]  --role_assignment v--> stop the stage actors of older plans, spawn one
///                 stage_actor per role of plan v --> [member]
///             --stage_ready / stage_failed (from its stage actors)--> to the supervisor
///             --tick--> heartbeat to the zone coordinator
///             --preempt (local: SIGTERM, spot notice)--> preemption_notice, its stage
///                 actors stop (its ranks keep their state in memory) --> [leaving]
///             --link_probe_request (the coordinator)--> options.on_link_probe, whose
///                 answer (a link_probe_result) goes back to the asking actor
///             --checkpoint_kept--> options.on_checkpoint_kept (the trainer's writers keep it)
///             --shutdown_notice--> quit (outcome by the notice's kind: job finished, shut
///                 down before that, or declared lost, which the process answers by joining
///                 again as a new member)
///   [leaving] the node's reports still go to the supervisor, its shard server serves its
///             state to the next plan (whose training_job and role_assignment, without
///             roles, reach the trainer: options.on_training_job), checkpoint_kept still
///             reaches the trainer; --shutdown_notice (the next plan has its state) or
///             the grace period (options.leave_grace) over--> quit (outcome: preempted)
///   any state: the supervisor's endpoint goes down --> quit (outcome: coordinator lost)

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "sailor/actors/node_agent_interface.hpp"
#include "sailor/actors/stage_actor.hpp"
#include "sailor/actors/supervisor_interface.hpp"

namespace sailor::actors {

/// How the agent ended; read after the agent is down.
struct agent_outcome {
  enum class kind {
    running,
    job_finished,      ///< shut down by the coordinator: the job finished
    shut_down,         ///< shut down by the coordinator before the job finished (let go, stopped)
    declared_lost,     ///< the coordinator declared it lost (it was silent): it may join again
    refused,
    preempted,
    coordinator_lost,
  };
  kind how = kind::running;
  std::string reason;
};

struct node_agent_options {
  node_inventory inventory;
  /// The newest plan version this node's ranks ran (join_request::last_plan_version).
  std::int64_t last_plan_version = 0;
  /// Usually a bridge proxy of the coordinator's "supervisor".
  supervisor_node_port supervisor;
  /// Resolves a named actor of the coordinator (the zone coordinator for heartbeats).
  std::function<caf::actor(const std::string&)> resolve;
  stage_hook hook;  ///< given to every stage actor; empty: stages are ready at once
  /// Called with each training_job, its plan filled in: the job arrives just before the
  /// role_assignment of its plan version, which carries the plan (protocol/messages.hpp);
  /// the agent holds the job until then and calls this before it starts the stages.
  std::function<void(const training_job&)> on_training_job;
  /// Called with each checkpoint_kept: the newest checkpoint of the running plan complete
  /// across its stages, which the node's writers must not prune. Empty: dropped.
  std::function<void(const checkpoint_kept&)> on_checkpoint_kept;
  std::shared_ptr<agent_outcome> outcome = std::make_shared<agent_outcome>();
  /// After a preemption notice: the longest the node stays to hand over its state.
  caf::timespan leave_grace = std::chrono::seconds{10};
  /// Called on a preemption notice, before the node's stages stop (the trainer then hands
  /// its ranks' state over to nodes that stay). Empty: nothing.
  std::function<void()> on_leaving;
  /// Serves or runs a link probe the coordinator asked for (issue 14); must not block: the
  /// answer goes to `answer`, from any thread. Empty: the request is answered with an error.
  std::function<void(const protocol::link_probe_request&,
                     std::function<void(protocol::link_probe_result)> answer)>
    on_link_probe;
};

struct node_agent_state {
  node_agent_options options;
  caf::actor zone;
  caf::timespan heartbeat_interval{};
  std::uint64_t heartbeat_seq = 0;
  std::int64_t plan_version = 0;
  std::vector<caf::actor> stages;
  int ready = 0;
  std::map<std::int64_t, training_job> jobs;  ///< waiting for their plan's assignment
  static inline const char* name = "node_agent";
};

/// Every state handles the whole interface (node_agent_interface.hpp); what a state does not
/// act on, it drops.
node_agent_actor::behavior_type node_agent(node_agent_actor::stateful_pointer<node_agent_state> self,
                                           node_agent_options options);

}  // namespace sailor::actors
