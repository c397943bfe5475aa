#pragma once
/// The messages of the Sailor actor runtime.
///
/// Two kinds: wire messages cross processes (the bridge encodes them, see wire.hpp) and local
/// messages stay inside one actor system. Every type has an `inspect` overload (CAF 0.17) and
/// is registered by `add_message_types`, which every process must call on its config.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "sailor/config/plan.hpp"

namespace sailor::config {

// CAF 0.17 inspection of the plan value types, so that plans can travel in messages.

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica& x) {
  return f(caf::meta::type_name("replica"), x.gpu_type, x.zone, x.tp, x.nodes, x.devices);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_plan& x) {
  return f(caf::meta::type_name("stage_plan"), x.first_layer, x.num_layers, x.recompute,
           x.replicas);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_estimate& x) {
  return f(caf::meta::type_name("plan_estimate"), x.iteration_time_s, x.throughput_iters_per_s,
           x.cost_per_iteration_usd, x.cost_per_hour_usd, x.peak_memory_bytes, x.notes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan& x) {
  bool has_estimate = x.estimate.has_value();
  plan_estimate estimate = x.estimate.value_or(plan_estimate{});
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    if (has_estimate)
      x.estimate = estimate;
    else
      x.estimate.reset();
    return caf::none;
  });
  return f(caf::meta::type_name("plan"), x.micro_batch, x.global_batch, x.stages, has_estimate,
           estimate, restore);
}

}  // namespace sailor::config

namespace sailor::actors {

/// The version of the node <-> coordinator protocol; a peer of another version is refused.
/// The same number as comm::protocol_version (the Cap'n Proto envelope's version).
inline constexpr std::uint16_t protocol_version = 3;

// -- wire messages ------------------------------------------------------------------------

/// One device of a node: `cpu` devices emulate GPUs on machines without them.
struct device_info {
  int index = 0;
  std::string kind;  ///< "cpu" or "cuda"
  std::uint64_t memory_bytes = 0;
};

/// What a node brings: its devices, their GPU type and the zone it runs in.
struct node_inventory {
  std::string name;
  std::string zone;
  std::string gpu_type;
  std::string host;
  std::vector<device_info> devices;
  /// host:port of this node's shard server; host is the address its peers reach it on
  /// (`sailor-node --advertise`), where its collectives listen too.
  std::string address;
  /// The checkpoint shards in the node's state folder (relative paths), so that a
  /// coordinator that restarts learns what the job still holds.
  std::vector<std::string> checkpoints;
};

/// First message of a node: asks to join the job.
struct join_request {
  std::uint16_t version = protocol_version;
  node_inventory inventory;
};

/// The supervisor accepted the node; heartbeats are expected every `heartbeat_interval_ms` to
/// the actor named `zone_actor`.
struct join_accepted {
  std::string node;
  std::string zone_actor;
  std::int64_t heartbeat_interval_ms = 0;
  std::int64_t heartbeat_timeout_ms = 0;
};

/// The supervisor (or the bridge) refused the node; `reason` says why.
struct join_refused {
  std::string reason;
};

struct heartbeat {
  std::string node;
  std::uint64_t seq = 0;
};

/// What one stage actor runs: one device's share of one replica of one stage.
struct stage_role {
  std::int64_t plan_version = 0;
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;
  int tp = 1;
  int device = 0;
  int first_layer = 0;
  int num_layers = 0;
  int micro_batch = 1;
  int num_stages = 1;
  std::string gpu_type;
  std::string zone;
};

/// All the roles of one node under one plan (empty: the node idles under this plan), and the
/// plan itself (placed: replicas name their nodes and devices).
struct role_assignment {
  std::int64_t plan_version = 0;
  std::vector<stage_role> roles;
  config::plan plan;
};

/// A stage actor is set up and ready to run its role.
struct stage_ready {
  std::string node;
  stage_role role;
};

/// A stage actor could not take its role.
struct stage_failed {
  std::string node;
  stage_role role;
  std::string reason;
};

/// Per-iteration timings of one stage actor.
struct telemetry {
  std::string node;
  int stage = 0;
  int replica = 0;
  std::int64_t iteration = 0;
  double iteration_s = 0;
};

/// The node is about to go away (spot preemption): re-plan without it.
struct preemption_notice {
  std::string node;
  std::string reason;
};

/// The coordinator ends the job or releases the node.
struct shutdown_notice {
  std::string reason;
};

/// Asks the supervisor for a cluster_status.
struct status_request {
  int unused = 0;
};

/// A peer was refused at the door (bad bytes, wrong version, unknown zone); the supervisor
/// keeps the recent ones for `sailor status`.
struct peer_refused {
  std::string peer;  ///< its address (host:port) or node name
  std::string reason;
  std::int64_t unix_ms = 0;  ///< when (0: stamped by the supervisor on arrival)
};

/// One node as the supervisor sees it.
struct node_status {
  node_inventory inventory;
  std::string state;               ///< joined, assigned, ready, lost
  std::int64_t heartbeat_age_ms = -1;  ///< -1: none received yet
  std::vector<stage_role> roles;
  int ready_roles = 0;
};

/// A snapshot of the job: phase, plan, nodes and recent events.
struct cluster_status {
  std::string phase;  ///< collecting, planning, assigning, running, waiting
  std::int64_t plan_version = 0;
  int quorum = 0;
  int stages = 0;
  int replicas = 0;
  int roles_total = 0;
  int roles_ready = 0;
  std::string plan_summary;
  std::vector<std::string> zones;
  std::vector<node_status> nodes;
  std::vector<std::string> events;  ///< most recent last
  std::vector<peer_refused> refusals;  ///< peers refused at the door, most recent last
  int training_completed = 0;  ///< iterations completed (by any plan), when training
  int training_total = 0;      ///< iterations asked for; 0: not training
  double training_loss = 0;    ///< of the newest completed iteration
  std::string training_summary;
  /// The validation curve (jobs with eval_every): iterations completed at each pass, and its
  /// loss; the same length.
  std::vector<std::int64_t> val_iterations;
  std::vector<double> val_losses;
};

// -- local messages -----------------------------------------------------------------------

/// A node is gone (missed heartbeats, endpoint error, preemption); sent to the supervisor.
struct node_lost {
  std::string node;
  std::string reason;
};

/// Heartbeat ages of one zone's nodes, sent by a zone_coordinator to the supervisor.
struct zone_heartbeats {
  std::string zone;
  std::vector<std::string> nodes;
  std::vector<std::int64_t> ages_ms;
};

/// Starts or stops heartbeat tracking of a node (supervisor -> zone_coordinator).
struct track_node {
  std::string node;
};
struct untrack_node {
  std::string node;
};

/// Every replica of a stage's TP group has reported ready (replica_group -> supervisor).
struct replica_ready {
  std::int64_t plan_version = 0;
  int stage = 0;
  int replica = 0;
};


using tick_atom = caf::atom_constant<caf::atom("tick")>;
using settle_atom = caf::atom_constant<caf::atom("settle")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
/// A stage's work (its training thread) is ready: its communicators are up.
using ready_atom = caf::atom_constant<caf::atom("ready")>;
/// Supervisor to itself: has the training failure of a plan version outlived its grace time?
using train_check_atom = caf::atom_constant<caf::atom("trcheck")>;
/// To the supervisor, in its process (with a reason): measurements show that another plan
/// would be clearly better; re-plan while running (issue 14's closed loop).
using drift_replan_atom = caf::atom_constant<caf::atom("driftrp")>;

// -- inspect ------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_info& x) {
  return f(caf::meta::type_name("device_info"), x.index, x.kind, x.memory_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_inventory& x) {
  return f(caf::meta::type_name("node_inventory"), x.name, x.zone, x.gpu_type, x.host,
           x.devices, x.address, x.checkpoints);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_request& x) {
  return f(caf::meta::type_name("join_request"), x.version, x.inventory);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_accepted& x) {
  return f(caf::meta::type_name("join_accepted"), x.node, x.zone_actor,
           x.heartbeat_interval_ms, x.heartbeat_timeout_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_refused& x) {
  return f(caf::meta::type_name("join_refused"), x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat& x) {
  return f(caf::meta::type_name("heartbeat"), x.node, x.seq);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_role& x) {
  return f(caf::meta::type_name("stage_role"), x.plan_version, x.stage, x.replica, x.tp_rank,
           x.tp, x.device, x.first_layer, x.num_layers, x.micro_batch, x.num_stages,
           x.gpu_type, x.zone);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, role_assignment& x) {
  return f(caf::meta::type_name("role_assignment"), x.plan_version, x.roles, x.plan);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_ready& x) {
  return f(caf::meta::type_name("stage_ready"), x.node, x.role);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_failed& x) {
  return f(caf::meta::type_name("stage_failed"), x.node, x.role, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, telemetry& x) {
  return f(caf::meta::type_name("telemetry"), x.node, x.stage, x.replica, x.iteration,
           x.iteration_s);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preemption_notice& x) {
  return f(caf::meta::type_name("preemption_notice"), x.node, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shutdown_notice& x) {
  return f(caf::meta::type_name("shutdown_notice"), x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status_request& x) {
  return f(caf::meta::type_name("status_request"), x.unused);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_status& x) {
  return f(caf::meta::type_name("node_status"), x.inventory, x.state, x.heartbeat_age_ms,
           x.roles, x.ready_roles);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_status& x) {
  return f(caf::meta::type_name("cluster_status"), x.phase, x.plan_version, x.quorum,
           x.stages, x.replicas, x.roles_total, x.roles_ready, x.plan_summary, x.zones,
           x.nodes, x.events, x.refusals, x.training_completed, x.training_total,
           x.training_loss, x.training_summary, x.val_iterations, x.val_losses);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_lost& x) {
  return f(caf::meta::type_name("node_lost"), x.node, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, zone_heartbeats& x) {
  return f(caf::meta::type_name("zone_heartbeats"), x.zone, x.nodes, x.ages_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, track_node& x) {
  return f(caf::meta::type_name("track_node"), x.node);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, untrack_node& x) {
  return f(caf::meta::type_name("untrack_node"), x.node);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_ready& x) {
  return f(caf::meta::type_name("replica_ready"), x.plan_version, x.stage, x.replica);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_refused& x) {
  return f(caf::meta::type_name("peer_refused"), x.peer, x.reason, x.unix_ms);
}

/// Registers every message type of this header and of scheduler_api.hpp with `cfg`.
/// Call it once per process before creating the actor system.
void add_message_types(caf::actor_system_config& cfg);

}  // namespace sailor::actors
