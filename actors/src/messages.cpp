#include "sailor/actors/messages.hpp"

#include "sailor/actors/probe_messages.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/train_messages.hpp"

namespace sailor::actors {

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<device_info>("sailor.device_info")
    .add_message_type<node_inventory>("sailor.node_inventory")
    .add_message_type<join_request>("sailor.join_request")
    .add_message_type<join_accepted>("sailor.join_accepted")
    .add_message_type<join_refused>("sailor.join_refused")
    .add_message_type<heartbeat>("sailor.heartbeat")
    .add_message_type<stage_role>("sailor.stage_role")
    .add_message_type<role_assignment>("sailor.role_assignment")
    .add_message_type<stage_ready>("sailor.stage_ready")
    .add_message_type<stage_failed>("sailor.stage_failed")
    .add_message_type<preemption_notice>("sailor.preemption_notice")
    .add_message_type<shutdown_notice>("sailor.shutdown_notice")
    .add_message_type<status_request>("sailor.status_request")
    .add_message_type<node_status>("sailor.node_status")
    .add_message_type<cluster_status>("sailor.cluster_status")
    .add_message_type<node_lost>("sailor.node_lost")
    .add_message_type<zone_heartbeats>("sailor.zone_heartbeats")
    .add_message_type<track_node>("sailor.track_node")
    .add_message_type<untrack_node>("sailor.untrack_node")
    .add_message_type<replica_ready>("sailor.replica_ready")
    .add_message_type<peer_refused>("sailor.peer_refused")
    .add_message_type<availability_event>("sailor.availability_event")
    .add_message_type<plan_request>("sailor.plan_request")
    .add_message_type<plan_reply>("sailor.plan_reply")
    .add_message_type<training_job>("sailor.training_job")
    .add_message_type<train_report>("sailor.train_report")
    .add_message_type<checkpoint_kept>("sailor.checkpoint_kept")
    .add_message_type<protocol::store_request>("sailor.store_request")
    .add_message_type<protocol::store_reply>("sailor.store_reply")
    .add_message_type<store_scope>("sailor.store_scope");
  // The scheduler protocol (scheduler_api.hpp).
  cfg.add_message_type<placement_rule>("sailor.placement_rule")
    .add_message_type<iteration_telemetry>("sailor.iteration_telemetry")
    .add_message_type<plan_applied>("sailor.plan_applied")
    .add_message_type<plan_refused>("sailor.plan_refused")
    .add_message_type<replan_finished>("sailor.replan_finished")
    .add_message_type<replan_now>("sailor.replan_now")
    .add_message_type<drain_node>("sailor.drain_node")
    .add_message_type<evict_node>("sailor.evict_node")
    .add_message_type<objective_change>("sailor.objective_change")
    .add_message_type<scheduler_answer>("sailor.scheduler_answer")
    .add_message_type<scheduler_attached>("sailor.scheduler_attached");
  // A scheduler in its own process (remote_scheduler.hpp): only on the wire.
  cfg.add_message_type<protocol::scheduler_hello>("sailor.scheduler_hello")
    .add_message_type<protocol::scheduler_request>("sailor.scheduler_request")
    .add_message_type<protocol::scheduler_reply>("sailor.scheduler_reply");
  // Link probes between nodes (probe_messages.hpp).
  cfg.add_message_type<protocol::link_probe_request>("sailor.link_probe_request")
    .add_message_type<protocol::link_probe_result>("sailor.link_probe_result");
}

}  // namespace sailor::actors
