// Which nodes a spot preemption of `--preempt-at` takes (see preemption.hpp).
#include "preemption.hpp"

#include <algorithm>

namespace sailor::app {
namespace {

bool plan_uses(const config::plan& plan, const std::string& node) {
  for (const auto& stage : plan.stages)
    for (const auto& replica : stage.replicas)
      if (std::count(replica.nodes.begin(), replica.nodes.end(), node) > 0)
        return true;
  return false;
}

}  // namespace

std::set<std::string> preemption_victims(const std::vector<std::string>& live,
                                         const std::optional<config::plan>& plan,
                                         bool whole_stage) {
  if (live.empty())
    return {};
  std::string victim = live.back();
  if (plan) {
    auto used = std::find_if(live.rbegin(), live.rend(),
                             [&](const std::string& n) { return plan_uses(*plan, n); });
    if (used != live.rend())
      victim = *used;
  }
  std::set<std::string> victims{victim};
  if (whole_stage && plan)
    for (const auto& stage : plan->stages) {
      config::plan one;
      one.stages = {stage};
      if (!plan_uses(one, victim))
        continue;
      for (const auto& replica : stage.replicas)
        victims.insert(replica.nodes.begin(), replica.nodes.end());
    }
  return victims;
}

int nodes_in(const config::plan& plan) {
  std::set<std::string> nodes;
  for (const auto& stage : plan.stages)
    for (const auto& replica : stage.replicas)
      nodes.insert(replica.nodes.begin(), replica.nodes.end());
  return static_cast<int>(nodes.size());
}

std::vector<std::string> idle_nodes(const std::vector<std::string>& live, const config::plan& plan) {
  std::vector<std::string> idle;
  for (const auto& n : live)
    if (!plan_uses(plan, n))
      idle.push_back(n);
  return idle;
}

}  // namespace sailor::app
