#include "live_planning.hpp"

#include <cstdio>

#include "sailor/planner/planner.hpp"

namespace sailor::app {

void live_loop::observe(const actors::iteration_record& r) {
  std::lock_guard lock{mu};
  // Each plan's first iteration pays the warm-up (allocations, first connections).
  if (r.iteration <= plan_start_iteration || bottleneck_type.empty() || suspect)
    return;
  // Without the time on zone links when the plan has some (both sides): a link's slowness is
  // the link's correction (drift_watch::observe_link), not the device type's.
  double predicted = raw_predicted_s, measured = r.measured_s;
  if (raw_cross_zone_s > 0 && r.all_reduce_s > 0 && raw_predicted_s > raw_cross_zone_s &&
      r.measured_s > r.all_reduce_s) {
    predicted -= raw_cross_zone_s;
    measured -= r.all_reduce_s;
  }
  auto why = correction.add(bottleneck_type, predicted, measured, r.iteration);
  if (!why.empty()) {
    std::fprintf(stderr, "  warning: iteration %lld's time not trusted: %s\n",
                 static_cast<long long>(r.iteration + 1), why.c_str());
    refused.push_back(why);
    if (refused.size() > 8)
      refused.erase(refused.begin());
  }
}

void live_loop::on_plan(int start_iteration, double raw_s, const std::string& type,
                        double cross_zone_s) {
  std::lock_guard lock{mu};
  raw_cross_zone_s = cross_zone_s;
  plan_start_iteration = start_iteration;
  suspect = false;
  raw_predicted_s = raw_s;
  bottleneck_type = type;
}

result<config::plan> search_plan(const std::vector<actors::node_inventory>& nodes,
                                 const config::cluster& cluster, const config::model_shape& model,
                                 const config::job& job, const measured_profile* profile,
                                 const simulator::speed_correction& correction) {
  planner::availability available;
  for (const auto& node : nodes)
    if (!node.devices.empty())
      available[node.gpu_type][node.zone] += static_cast<int>(node.devices.size());
  planner::problem prob;
  prob.model = model;
  if (profile)
    prob.profile = correction.apply(profile->profile);
  prob.cluster = planner::with_availability(cluster, available);
  prob.job = job;
  prob.sim = cpu_sim_options(profile);
  auto chosen = planner::plan_job(prob);
  if (!chosen)
    return chosen.error();
  for (auto& stage : chosen->plan.stages)
    for (auto& r : stage.replicas) {
      r.nodes.clear();
      r.devices.clear();
    }
  return result<config::plan>{std::move(chosen->plan)};
}

}  // namespace sailor::app
