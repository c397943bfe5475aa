#pragma once
// Which nodes `sailor demo --preempt-at K` / `sailor train --preempt-at K` take.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sailor/config/plan.hpp"

namespace sailor::app {

/// The nodes a spot preemption takes: the newest of `live` (oldest first) that the running
/// `plan` uses, since losing a node the plan leaves idle changes nothing (the newest live node
/// when there is no plan yet or the plan names none of them); with `whole_stage`, every node
/// of that node's stage as well. Empty when nothing is live.
std::set<std::string> preemption_victims(const std::vector<std::string>& live,
                                         const std::optional<config::plan>& plan,
                                         bool whole_stage);

/// How many distinct nodes `plan` uses.
int nodes_in(const config::plan& plan);

/// The nodes of `live` that `plan` leaves idle, in `live`'s order.
std::vector<std::string> idle_nodes(const std::vector<std::string>& live, const config::plan& plan);

}  // namespace sailor::app
