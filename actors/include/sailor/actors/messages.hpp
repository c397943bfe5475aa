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

#include "sailor/actors/inspect.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::config {

// CAF 0.17 inspection of the plan value types, so that plans can travel in messages.

SAILOR_INSPECT(replica, x.gpu_type, x.zone, x.tp, x.nodes, x.devices)
SAILOR_INSPECT(stage_plan, x.first_layer, x.num_layers, x.recompute, x.replicas)
SAILOR_INSPECT(plan_estimate, x.iteration_time_s, x.throughput_iters_per_s,
               x.cost_per_iteration_usd, x.cost_per_hour_usd, x.peak_memory_bytes, x.notes)
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

/// The wire messages are protocol/'s structs (sailor/protocol/messages.hpp), sent as CAF
/// messages as they are; the bridge encodes them with protocol/'s codec.
using protocol::protocol_version;
using protocol::device_info;
using protocol::node_inventory;
using protocol::join_request;
using protocol::join_accepted;
using protocol::join_refused;
using protocol::refuse_reason;
using protocol::heartbeat;
using protocol::stage_role;
using protocol::role_assignment;
using protocol::stage_ready;
using protocol::stage_failed;
using protocol::preemption_notice;
using protocol::shutdown_notice;
using protocol::shutdown_kind;
using protocol::status_request;
using protocol::peer_refused;
using protocol::node_status;
using protocol::cluster_status;

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

SAILOR_INSPECT(node_lost, x.node, x.reason)
SAILOR_INSPECT(zone_heartbeats, x.zone, x.nodes, x.ages_ms)
SAILOR_INSPECT(track_node, x.node)
SAILOR_INSPECT(untrack_node, x.node)
SAILOR_INSPECT(replica_ready, x.plan_version, x.stage, x.replica)
}  // namespace sailor::actors

// CAF 0.17 inspection of the wire messages (found by argument-dependent lookup).
namespace sailor::protocol {

SAILOR_INSPECT(device_info, x.index, x.kind, x.memory_bytes)
SAILOR_INSPECT(node_inventory, x.name, x.zone, x.gpu_type, x.host, x.devices, x.address,
               x.checkpoints)
SAILOR_INSPECT(join_request, x.version, x.inventory, x.last_plan_version)
SAILOR_INSPECT(join_accepted, x.node, x.zone_actor, x.heartbeat_interval_ms, x.heartbeat_timeout_ms)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_refused& x) {
  auto code = static_cast<std::int32_t>(x.code);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.code = static_cast<refuse_reason>(code);
    return caf::none;
  });
  return f(caf::meta::type_name("join_refused"), x.reason, code, restore);
}
SAILOR_INSPECT(heartbeat, x.node, x.seq)
SAILOR_INSPECT(stage_role, x.plan_version, x.stage, x.replica, x.tp_rank, x.tp, x.device,
               x.first_layer, x.num_layers, x.micro_batch, x.num_stages, x.gpu_type, x.zone)
SAILOR_INSPECT(role_assignment, x.plan_version, x.roles, x.plan)
SAILOR_INSPECT(stage_ready, x.node, x.role)
SAILOR_INSPECT(stage_failed, x.node, x.role, x.reason)
SAILOR_INSPECT(preemption_notice, x.node, x.reason, x.seconds_left)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shutdown_notice& x) {
  auto kind = static_cast<std::int32_t>(x.kind);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.kind = static_cast<shutdown_kind>(kind);
    return caf::none;
  });
  return f(caf::meta::type_name("shutdown_notice"), x.reason, kind, restore);
}
SAILOR_INSPECT(status_request, x.unused)
SAILOR_INSPECT(node_status, x.inventory, x.state, x.heartbeat_age_ms, x.roles, x.ready_roles)
SAILOR_INSPECT(cluster_status, x.phase, x.plan_version, x.quorum, x.stages, x.replicas,
               x.roles_total, x.roles_ready, x.plan_summary, x.zones, x.nodes, x.events, x.refusals,
               x.training_completed, x.training_total, x.training_loss, x.training_summary,
               x.val_iterations, x.val_losses)
SAILOR_INSPECT(peer_refused, x.peer, x.reason, x.unix_ms)

}  // namespace sailor::protocol

namespace sailor::actors {

/// Registers every message type of this header and of scheduler_api.hpp with `cfg`.
/// Call it once per process before creating the actor system.
void add_message_types(caf::actor_system_config& cfg);

}  // namespace sailor::actors
