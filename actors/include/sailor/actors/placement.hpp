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
#include "sailor/protocol/scheduler_messages.hpp"

namespace sailor::actors {

using protocol::placement_rule;

/// Places every replica of `p` whose `nodes` are empty on free devices of joined nodes in its
/// zone with its GPU type (an empty GPU type matches any), preferring one node for the whole
/// TP group. Replicas already placed are checked (the nodes exist, devices free). On error
/// `p` is unchanged and the error says which replica did not fit.
///
/// The scheduler's placement `rules` are honoured: a stage pinned to a node that none of its
/// placed replicas uses gets its first unplaced replica that fits the node (zone, GPU type,
/// tp free devices) placed there, before any other replica takes the node's devices; no
/// replica is placed on a node a rule forbids for its stage. (Rules the plan's own placed
/// replicas break are not changed here: the supervisor refuses such a plan.)
status place_replicas(config::plan& p, const std::vector<node_inventory>& nodes,
                      const std::vector<placement_rule>& rules = {});

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

/// The ranks of `p` that run on node `node` (one per device it lends a replica).
int ranks_on_node(const config::plan& p, const std::string& node);

/// The ranks of `p` on every node whose address (`addresses[i]` of `nodes[i]`, HOST:PORT) has
/// the host of `node`'s: the ranks that share its machine's cores (several nodes of one
/// machine, as in tests and `sailor train`). Without `node` among `nodes`: its own ranks.
int ranks_on_host(const config::plan& p, const std::vector<std::string>& nodes,
                  const std::vector<std::string>& addresses, const std::string& node);

/// The compute threads (OpenBLAS's, for its matrix products) of one rank of a node: the job's
/// count when it names one (> 0), else the node's --threads when given (> 0), else the
/// node's `cores` shared among its `ranks` of the plan, at least 1 each.
int rank_threads(int job_threads, int node_threads, int ranks, unsigned cores);

}  // namespace sailor::actors
