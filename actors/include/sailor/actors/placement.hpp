#pragma once
/// From a plan to roles: which node and device runs which share of which replica.
///
/// Also a fallback planner (`even_plan`) used until the real planner is wired in, and by
/// tests: it needs no profiles and makes a valid plan over any set of nodes.

#include <map>
#include <string>
#include <vector>

#include "sailor/actors/messages.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::actors {

/// Places every replica of `p` whose `nodes` are empty on free devices of joined nodes in its
/// zone with its GPU type (an empty GPU type matches any), preferring one node for the whole
/// TP group. Replicas already placed are checked (the nodes exist, devices free). On error
/// `p` is unchanged and the error says which replica did not fit.
status place_replicas(config::plan& p, const std::vector<node_inventory>& nodes);

/// The roles of each node under a placed plan (nodes without roles are absent).
std::map<std::string, std::vector<stage_role>> roles_by_node(const config::plan& p,
                                                             std::int64_t plan_version);

/// A plan that needs no profiles: S = the smallest device count of a (zone, GPU type) group,
/// capped at the model's layer count; layers split evenly over S stages; each group gives
/// floor(devices / S) pipeline replicas of TP 1. Errors when there are no devices.
result<config::plan> even_plan(const std::vector<node_inventory>& nodes, int num_all_layers,
                               int global_batch);

/// One line per stage, for logs and `sailor status`.
std::string describe_plan(const config::plan& p);

}  // namespace sailor::actors
