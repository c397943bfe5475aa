// The node `--preempt-at` takes is one the running plan uses.
#include "preemption.hpp"

#include <doctest/doctest.h>

using sailor::app::idle_nodes;
using sailor::app::preemption_victims;

namespace {

// `stages` stages; stage s has one replica per node name in stages[s].
sailor::config::plan plan_of(const std::vector<std::vector<std::string>>& stages) {
  sailor::config::plan p;
  for (const auto& nodes : stages) {
    sailor::config::stage_plan stage;
    for (const auto& n : nodes) {
      sailor::config::replica r;
      r.nodes = {n};
      stage.replicas.push_back(r);
    }
    p.stages.push_back(stage);
  }
  return p;
}

}  // namespace

TEST_CASE("preemption: the newest node the plan uses is taken, not an idle one") {
  const std::vector<std::string> live{"node-0", "node-1", "node-2", "node-3"};
  // The plan runs on node-0 and node-1 only: node-2 and node-3 are idle, and losing them
  // would change nothing.
  auto plan = plan_of({{"node-0", "node-1"}});
  CHECK(preemption_victims(live, plan, false) == std::set<std::string>{"node-1"});
  CHECK(idle_nodes(live, plan) == std::vector<std::string>{"node-2", "node-3"});
  CHECK(sailor::app::nodes_in(plan) == 2);
  // Every node in the plan: the newest.
  auto full = plan_of({{"node-0", "node-2"}, {"node-1", "node-3"}});
  CHECK(preemption_victims(live, full, false) == std::set<std::string>{"node-3"});
  CHECK(idle_nodes(live, full).empty());
  // No plan yet: the newest live node.
  CHECK(preemption_victims(live, std::nullopt, false) == std::set<std::string>{"node-3"});
  CHECK(preemption_victims({}, plan, false).empty());
}

TEST_CASE("preemption: a whole stage is every replica of the taken node's stage") {
  const std::vector<std::string> live{"node-0", "node-1", "node-2", "node-3", "node-4"};
  auto plan = plan_of({{"node-0", "node-2"}, {"node-1", "node-3"}});
  CHECK(preemption_victims(live, plan, true) == std::set<std::string>{"node-1", "node-3"});
}
