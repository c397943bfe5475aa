#pragma once
// Private to the job supervisor: its side of the scheduler protocol (scheduler_api.hpp),
// in supervisor_scheduler.cpp. job_supervisor.cpp calls these at the points named.

#include <optional>
#include <string>
#include <vector>

#include "supervisor_internal.hpp"

namespace sailor::actors::supervision {

// job_supervisor.cpp
void on_plan(supervisor* self, plan_reply reply);
void capacity_changed(supervisor* self, const std::string& reason);

/// Why `p` cannot run on `nodes` under `rules` (a layer not covered, a node not among
/// `nodes`, a device too small for the predicted memory, a rule broken); nothing when it
/// can. `model_layers` 0: the layer count is not checked.
std::optional<std::string> plan_refusal(const config::plan& p,
                                        const std::vector<node_inventory>& nodes,
                                        const std::vector<placement_rule>& rules,
                                        int model_layers);

/// Asks the scheduler for a plan (the built-in planner when it is late, fails, or its plan is
/// refused); the validated answer goes to on_plan.
void request_plan(supervisor* self, plan_request request);
/// Whether node `name` is kept out of plans (drained, or forbidden on every stage).
bool excluded_from_plans(supervisor* self, const std::string& name);
/// The requests a scheduler sends (each answered: accepted, or refused with the reason and
/// nothing changed), and a drain's deadline.
scheduler_answer on_replan_now(supervisor* self, const replan_now& x);
scheduler_answer on_drain(supervisor* self, const drain_node& x);
scheduler_answer on_evict(supervisor* self, const evict_node& x);
scheduler_answer on_rule(supervisor* self, const placement_rule& x);
scheduler_answer on_objective(supervisor* self, const objective_change& x);
void on_drain_deadline(supervisor* self, const std::string& node);

// What the scheduler is told.
void tell_attached(supervisor* self);
void tell_preemption(supervisor* self, const std::string& node, const std::string& reason,
                     double seconds_left);
void tell_plan_applied(supervisor* self);
void tell_plan_started(supervisor* self);
void tell_iteration(supervisor* self, const train_report& x);

}  // namespace sailor::actors::supervision
