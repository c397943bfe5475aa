#pragma once
/// Bring your own scheduler: the protocol between the job supervisor and the actor that
/// decides plans.
///
/// The supervisor does not plan. It keeps the inventory of the nodes that joined and, when a
/// plan is needed (quorum reached, settle time over, a node lost or added), it sends the
/// scheduler a `plan_request` as a CAF request and waits for a `plan_reply`. It also tells
/// the scheduler every change of availability with an `availability_event` (a plain message,
/// no reply expected). Any CAF actor that handles these two messages can be the scheduler:
///
/// ```
/// caf::behavior my_scheduler(caf::event_based_actor* self) {
///   return {
///     [](const sailor::actors::plan_request& req) -> sailor::actors::plan_reply {
///       return sailor::actors::plan_reply::success(req.request_id, my_plan(req.nodes));
///     },
///     [](const sailor::actors::availability_event& ev) { /* remember it */ },
///   };
/// }
/// // then: supervisor_options.scheduler = system.spawn(my_scheduler);
/// ```
///
/// The plan returned names GPU types, zones and TP degrees per replica; the supervisor then
/// places each replica on devices of joined nodes of that zone and GPU type (placement.hpp)
/// and hands out roles. Replicas whose `nodes` and `devices` are already filled are placed as
/// given. A reply with `ok == false` keeps the job waiting for more capacity; the error is
/// shown by `sailor status`. `planner_actor.hpp` wraps a plain function as a scheduler.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::actors {

/// A node joined or was lost. `reason` says why a node was lost (missed heartbeats, endpoint
/// closed, preempted).
struct availability_event {
  std::string kind;  ///< "joined" or "lost"
  node_inventory node;
  std::string reason;
};

/// Asks for a plan over `nodes` (every node that is up now).
struct plan_request {
  std::int64_t request_id = 0;
  std::string reason;  ///< why a plan is needed now, for logs
  std::vector<node_inventory> nodes;
  bool has_current = false;
  config::plan current;  ///< the plan running now, when has_current (for re-planning)
};

/// The scheduler's answer: a plan, or the reason there is none.
struct plan_reply {
  std::int64_t request_id = 0;
  bool ok = false;
  config::plan plan;
  std::string error;

  static plan_reply success(std::int64_t id, config::plan p) {
    return plan_reply{id, true, std::move(p), {}};
  }
  static plan_reply failure(std::int64_t id, std::string why) {
    return plan_reply{id, false, {}, std::move(why)};
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, availability_event& x) {
  return f(caf::meta::type_name("availability_event"), x.kind, x.node, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_request& x) {
  return f(caf::meta::type_name("plan_request"), x.request_id, x.reason, x.nodes, x.has_current,
           x.current);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_reply& x) {
  return f(caf::meta::type_name("plan_reply"), x.request_id, x.ok, x.plan, x.error);
}

}  // namespace sailor::actors

