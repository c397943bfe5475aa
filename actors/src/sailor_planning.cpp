#include "sailor/actors/sailor_planning.hpp"

#include <cstdlib>

#include "sailor/simulator/simulator.hpp"

namespace sailor::actors {
namespace {

// The objective and constraints a scheduler set (objective_change, checked by the supervisor:
// known keys, numbers >= 0) over the job's own.
void apply_objective(config::job& job, const std::vector<std::string>& settings) {
  for (const auto& kv : settings) {
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      continue;
    auto key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "objective")
      job.goal = value == "cost" ? config::objective::min_cost : config::objective::max_throughput;
    else if (key == "max_cost_per_hour")
      job.limits.max_cost_per_hour_usd = std::strtod(value.c_str(), nullptr);
    else if (key == "min_throughput")
      job.limits.min_iterations_per_s = std::strtod(value.c_str(), nullptr);
  }
}

}  // namespace

planning_function sailor_planning(planner::problem base, planner::options options) {
  return [base = std::move(base), options = std::move(options)](
           const plan_request& request) -> result<config::plan> {
    planner::availability available;
    for (auto& node : request.nodes)
      if (!node.devices.empty())
        available[node.gpu_type][node.zone] += static_cast<int>(node.devices.size());
    auto prob = base;
    prob.cluster = planner::with_availability(base.cluster, available);
    apply_objective(prob.job, request.objective);
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
