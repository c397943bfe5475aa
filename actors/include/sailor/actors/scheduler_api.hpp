#pragma once
/// Bring your own scheduler: the typed protocol between the job supervisor and the actor that
/// decides plans.
///
/// The supervisor does not plan. It keeps the inventory of the nodes that joined, runs the
/// plans it is given, and tells the scheduler what happens. A scheduler is any actor of type
/// `scheduler_actor`; the built-in planner (`planner_actor.hpp`) is one, with no path of its
/// own in the supervisor. A scheduler sees the job and may steer it:
///
///   scheduler                                        supervisor
///   [attached] <-- scheduler_attached{supervisor port, built-in planner} -- (at start)
///   [serving]  <-- availability_event (joined / preemption_notice / lost) --
///              <-- plan_request ------------------------------------------ (a plan is needed)
///              --> plan_reply (within options.plan_timeout) ------------->
///                    valid ------------------> plan assigned to the nodes
///                    invalid (a layer not covered, a node not joined, memory, a rule broken)
///              <-- plan_refused{reason} ----- refused before any node acts; the built-in
///                                             planner decides instead (when there is one)
///                    late / failed -----------> the built-in planner decides (logged)
///              <-- plan_applied{version, plan, by} --- roles handed out
///              <-- replan_finished{version, recovery_s} --- every rank started the plan
///              <-- iteration_telemetry (per stage and replica, with the prediction) --
///              --> replan_now / drain_node / evict_node / placement_rule /
///                  objective_change --> scheduler_answer{accepted, reason}
///
/// A minimal scheduler (a function-based typed actor):
///
/// ```
/// scheduler_actor::behavior_type my_scheduler(scheduler_actor::pointer self) {
///   return {
///     [](const plan_request& req) -> plan_reply {
///       return plan_reply::success(req.request_id, my_plan(req.nodes));
///     },
///     [](const scheduler_attached&) {}, [](const availability_event&) {},
///     [](const iteration_telemetry&) {}, [](const plan_applied&) {},
///     [](const plan_refused&) {}, [](const replan_finished&) {},
///   };
/// }
/// // then: supervisor_options.scheduler = system.spawn(my_scheduler);
/// ```
///
/// A plain (dynamically typed) actor that handles only plan_request and availability_event
/// still works through `adapt_scheduler`, which forwards those two and drops the rest.
///
/// The plan returned names GPU types, zones and TP degrees per replica; the supervisor then
/// places each replica on devices of joined nodes of that zone and GPU type (placement.hpp)
/// and hands out roles. Replicas whose `nodes` and `devices` are already filled are placed as
/// given. A reply with `ok == false` keeps the job waiting for more capacity; the error is
/// shown by `sailor status`.
///
/// Requests a scheduler sends the supervisor (through `scheduler_attached::supervisor`) are
/// each answered with a `scheduler_answer`: accepted, or refused with the reason, and nothing
/// changed. Drained and forbidden nodes are left out of the nodes of later plan requests;
/// pinned and forbidden placements are also checked on every plan, whoever made it.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "sailor/actors/inspect.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/protocol/scheduler_messages.hpp"

namespace sailor::actors {

// The inputs a scheduler gets and its plan replies are protocol/'s structs
// (sailor/protocol/scheduler_messages.hpp says what each field means), so that they travel
// as they are to a scheduler in another process (remote_scheduler.hpp).
using protocol::availability_event;
using protocol::availability_kind;
using protocol::placement_kind;
using protocol::placement_rule;
using protocol::plan_request;
using protocol::plan_reply;
using protocol::iteration_telemetry;
using protocol::plan_applied;
using protocol::plan_refused;
using protocol::replan_finished;

/// Requests from a scheduler to the supervisor.
struct replan_now {
  std::string reason;
};
struct drain_node {
  std::string node;
  std::int64_t deadline_ms = 0;  ///< then the node is let go (0: once the next plan started)
};
struct evict_node {
  std::string node;
  std::string reason;
};
/// Sets an objective or constraint for later plan requests and re-plans. Keys: "objective"
/// ("throughput" or "cost"), "max_cost_per_hour", "min_throughput" (numbers >= 0).
struct objective_change {
  std::string key;
  std::string value;
};
struct scheduler_answer {
  bool accepted = false;
  std::string reason;
};

/// What the supervisor answers to a scheduler.
using supervisor_port =
  caf::typed_actor<caf::replies_to<replan_now>::with<scheduler_answer>,
                   caf::replies_to<drain_node>::with<scheduler_answer>,
                   caf::replies_to<evict_node>::with<scheduler_answer>,
                   caf::replies_to<placement_rule>::with<scheduler_answer>,
                   caf::replies_to<objective_change>::with<scheduler_answer>>;

/// The first message a scheduler gets: where to send requests, and the built-in planner to
/// ask for a candidate plan (empty when the job has none besides this scheduler).
struct scheduler_attached;

/// A scheduler.
using scheduler_actor =
  caf::typed_actor<caf::replies_to<plan_request>::with<plan_reply>,
                   caf::reacts_to<scheduler_attached>, caf::reacts_to<availability_event>,
                   caf::reacts_to<iteration_telemetry>, caf::reacts_to<plan_applied>,
                   caf::reacts_to<plan_refused>, caf::reacts_to<replan_finished>>;

struct scheduler_attached {
  supervisor_port supervisor;
  scheduler_actor builtin;
};

/// A scheduler made of a plain actor that handles plan_request (replying plan_reply) and
/// availability_event; the other inputs are dropped. Spawned in `system`; it ends with the
/// plain actor.
scheduler_actor adapt_scheduler(caf::actor_system& system, caf::actor plain);

SAILOR_INSPECT(replan_now, x.reason)
SAILOR_INSPECT(drain_node, x.node, x.deadline_ms)
SAILOR_INSPECT(evict_node, x.node, x.reason)
SAILOR_INSPECT(objective_change, x.key, x.value)
SAILOR_INSPECT(scheduler_answer, x.accepted, x.reason)
SAILOR_INSPECT(scheduler_attached, x.supervisor, x.builtin)

}  // namespace sailor::actors

// CAF 0.17 inspection of the scheduler protocol's wire structs (found by argument-dependent
// lookup in their namespace).
namespace sailor::protocol {

SAILOR_INSPECT(availability_event, x.kind, x.node, x.reason, x.deadline_ms)
SAILOR_INSPECT(placement_rule, x.kind, x.node, x.stage)
SAILOR_INSPECT(plan_request, x.request_id, x.reason, x.nodes, x.has_current, x.current, x.rules,
               x.objective, x.model_layers)
SAILOR_INSPECT(plan_reply, x.request_id, x.ok, x.plan, x.error)
SAILOR_INSPECT(iteration_telemetry, x.plan_version, x.iteration, x.node, x.stage, x.replica,
               x.measured_s, x.compute_s, x.wait_s, x.all_reduce_s, x.predicted_s, x.loss)
SAILOR_INSPECT(plan_applied, x.plan_version, x.plan, x.by)
SAILOR_INSPECT(plan_refused, x.request_id, x.reason)
SAILOR_INSPECT(replan_finished, x.plan_version, x.reason, x.recovery_s)
SAILOR_INSPECT(scheduler_hello, x.name)
SAILOR_INSPECT(scheduler_request, x.request_id, x.kind, x.node, x.reason, x.deadline_ms, x.stage,
               x.key, x.value)
SAILOR_INSPECT(scheduler_reply, x.request_id, x.accepted, x.reason)

}  // namespace sailor::protocol
