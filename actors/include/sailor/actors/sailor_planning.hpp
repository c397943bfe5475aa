#pragma once
/// The planner as the coordinator's scheduler: Sailor's search over the devices that joined.

#include <string>
#include <vector>

#include "sailor/actors/planner_actor.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::actors {

/// A planning function (for planner_actor) that runs `planner::plan_job` over the devices of
/// the joined nodes: the availability is the count of joined devices per (GPU type, zone),
/// replacing the counts of `base.cluster` (which gives zones, links and prices). With a
/// current plan it calls `planner::replan`, which keeps as much of the running plan as the
/// objective allows. The plan comes back unplaced; the supervisor places it on nodes.
/// The plan's estimate notes (plan_estimate::notes) say where the times come from when a GPU
/// type that joined has no profile.
planning_function sailor_planning(planner::problem base, planner::options options = {});

/// Where the times of `p`'s estimate come from when a GPU type it uses has no profile: the
/// simulator's notes (the catalog's peak FLOP/s and the efficiency assumed); empty when
/// every time is profiled.
std::vector<std::string> estimate_notes(const planner::problem& prob, const config::plan& p);

/// One line for people: "analytic estimate: <notes>", or "" when profiled.
std::string estimate_basis(const config::plan& p);

}  // namespace sailor::actors
