#pragma once
/// What the job supervisor keeps about its scheduler (scheduler_api.hpp): the rules and
/// objective it set, the nodes it drains, and the re-plan in progress. Part of
/// supervisor_state; changed only by the supervisor (supervisor_scheduler.cpp).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>

#include "sailor/actors/scheduler_api.hpp"

namespace sailor::actors {

struct scheduler_session {
  std::set<std::string> drained;          ///< left out of plans, let go once a plan started
  std::vector<placement_rule> rules;      ///< pin and forbid rules in force
  std::map<std::string, std::string> objective;  ///< objective_change keys and values
  std::string plan_by;                    ///< who made the current plan
  std::string last_refusal;               ///< why the last refused plan was refused
  std::int64_t refused_plans = 0;
  std::int64_t fallbacks = 0;             ///< decisions the built-in planner took over
  bool recovering = false;                ///< a re-plan began and its plan has not started
  std::string recovery_reason;
  caf::actor_clock::time_point recovery_began{};
  std::int64_t telemetry_sent = 0;
};

}  // namespace sailor::actors
