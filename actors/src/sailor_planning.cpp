#include "sailor/actors/sailor_planning.hpp"

#include "sailor/simulator/simulator.hpp"

namespace sailor::actors {

planning_function sailor_planning(planner::problem base, planner::options options) {
  return [base = std::move(base), options = std::move(options)](
           const plan_request& request) -> result<config::plan> {
    planner::availability available;
    for (auto& node : request.nodes)
      if (!node.devices.empty())
        available[node.gpu_type][node.zone] += static_cast<int>(node.devices.size());
    auto prob = base;
    prob.cluster = planner::with_availability(base.cluster, available);
    // Node names are the supervisor's business: the planner sees GPU types and zones only.
    auto current = request.current;
    for (auto& stage : current.stages)
      for (auto& r : stage.replicas) {
        r.nodes.clear();
        r.devices.clear();
      }
    auto chosen = request.has_current ? planner::replan(prob, current, options)
                                      : planner::plan_job(prob, options);
    if (!chosen)
      return chosen.error();
    auto plan = std::move(chosen->plan);
    for (auto& stage : plan.stages)
      for (auto& r : stage.replicas) {
        r.nodes.clear();
        r.devices.clear();
      }
    if (plan.estimate)
      plan.estimate->notes = estimate_notes(prob, plan);
    return plan;
  };
}

std::vector<std::string> estimate_notes(const planner::problem& prob, const config::plan& p) {
  auto ctx = planner::make_context(prob);
  if (!ctx)
    return {};
  auto sim = simulator::simulate(*ctx, p);
  return sim ? sim->notes : std::vector<std::string>{};
}

std::string estimate_basis(const config::plan& p) {
  if (!p.estimate || p.estimate->notes.empty())
    return {};
  std::string out = "analytic estimate (no profile): ";
  for (std::size_t i = 0; i < p.estimate->notes.size(); ++i)
    out += (i ? "; " : "") + p.estimate->notes[i];
  return out;
}

}  // namespace sailor::actors
