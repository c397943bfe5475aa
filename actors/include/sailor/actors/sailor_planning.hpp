#pragma once
/// The planner as the coordinator's scheduler: Sailor's search over the devices that joined.

#include "sailor/actors/planner_actor.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::actors {

/// A planning function (for planner_actor) that runs `planner::plan_job` over the devices of
/// the joined nodes: the availability is the count of joined devices per (GPU type, zone),
/// replacing the counts of `base.cluster` (which gives zones, links and prices). With a
/// current plan it calls `planner::replan`, which keeps as much of the running plan as the
/// objective allows. The plan comes back unplaced; the supervisor places it on nodes.
planning_function sailor_planning(planner::problem base, planner::options options = {});

}  // namespace sailor::actors
