#pragma once
/// planner_actor: a scheduler (scheduler_api.hpp) made from a planning function; the built-in
/// planner is one.
///
///   [serving] --plan_request--> call the function --> plan_reply --> [serving]
///             --availability_event, telemetry, plan_applied, ...--> count it --> [serving]
///
/// The function is pure and runs inside the handler: plans are chosen one at a time, and the
/// supervisor waits for the reply (its other messages keep flowing meanwhile). Another
/// scheduler may send it plan requests too, to get a candidate it then adjusts.

#include <functional>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "sailor/actors/scheduler_api.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

/// Plans over the nodes of a request. Errors say why no plan fits.
using planning_function = std::function<result<config::plan>(const plan_request&)>;

struct planner_state {
  planning_function plan;
  std::int64_t plans_made = 0;
  std::int64_t plans_failed = 0;
  std::int64_t events_seen = 0;
  static inline const char* name = "planner_actor";
};

using planner_pointer = scheduler_actor::stateful_pointer<planner_state>;

scheduler_actor::behavior_type planner_actor(planner_pointer self, planning_function plan);

}  // namespace sailor::actors
