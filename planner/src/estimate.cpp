// The planner's closed form of a complete plan: 1F1B pipeline of the slowest replica per stage,
// point-to-point transfers between consecutive stages of each pipeline, a ring all-reduce of
// gradients per stage over its replicas (limited by the ring's slowest link), the optimizer step,
// GPU dollars for the iteration and egress dollars for every byte that leaves a zone.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "estimate.hpp"

namespace sailor::planner {

availability availability_of(const config::cluster& c) {
  availability out;
  for (const auto& z : c.zones)
    for (const auto& [g, n] : z.gpus)
      if (n > 0) out[g][z.name] += n;
  return out;
}

config::cluster with_availability(config::cluster c, const availability& a) {
  for (auto& z : c.zones) z.gpus.clear();
  for (const auto& [g, zones] : a)
    for (const auto& [zn, n] : zones) c.add_zone(zn).gpus[g] += n;
  return c;
}

std::string summary(const config::plan& p) {
  std::ostringstream o;
  o << "mbs " << p.micro_batch;
  for (const auto& s : p.stages) {
    o << " | [" << s.first_layer << "," << s.end_layer() << ")" << (s.recompute ? " rc" : "");
    // Runs of equal replicas, in order.
    for (size_t i = 0; i < s.replicas.size();) {
      size_t j = i;
      const auto& r = s.replicas[i];
      while (j < s.replicas.size() && s.replicas[j].gpu_type == r.gpu_type &&
             s.replicas[j].zone == r.zone && s.replicas[j].tp == r.tp)
        ++j;
      o << " " << (j - i) << "x" << r.gpu_type << "/tp" << r.tp << "@" << r.zone;
      i = j;
    }
  }
  if (p.estimate)
    o << " || " << p.estimate->iteration_time_s << " s/it, $" << p.estimate->cost_per_iteration_usd << "/it";
  return o.str();
}

double objective_value(const config::job& job, const config::plan_estimate& e) {
  return job.goal == config::objective::min_cost ? e.cost_per_iteration_usd : e.iteration_time_s;
}

bool meets_constraints(const config::job& job, const config::plan_estimate& e) {
  const auto& c = job.limits;
  const double eps = 1e-9;
  if (c.max_cost_per_iteration_usd && e.cost_per_iteration_usd > *c.max_cost_per_iteration_usd + eps)
    return false;
  if (c.max_cost_per_hour_usd && e.cost_per_hour_usd > *c.max_cost_per_hour_usd + eps) return false;
  if (c.min_iterations_per_s && e.throughput_iters_per_s < *c.min_iterations_per_s - eps)
    return false;
  return true;
}

namespace detail {

result<estimate> estimate_with(const problem& prob, const tables& tab, const network& net,
                               const config::plan& p) {
  (void)prob;
  (void)net;
  return simulator::simulate(tab.context(), p);
}

}  // namespace detail

bottleneck bottleneck_of(const estimate& e) {
  if (e.stages.empty()) return {};
  double sync_s = 0, update_s = 0;
  int sync_stage = 0;
  for (size_t s = 0; s < e.stages.size(); ++s) {
    if (e.stages[s].allreduce_s > sync_s) sync_s = e.stages[s].allreduce_s, sync_stage = int(s);
    update_s = std::max(update_s, e.stages[s].update_s);
  }
  std::ostringstream what;
  if (e.sync_and_update_s > e.steady_s && sync_s >= update_s) {
    what << "gradient sync of stage " << sync_stage;
    return {what.str(), sync_s};
  }
  if (e.sync_and_update_s > e.steady_s) return {"optimizer step", update_s};
  const auto& st = e.stages[e.bottleneck_stage];
  const double send = st.send_forward_s + st.send_backward_s;
  if (send > st.forward_s + st.backward_s) what << "p2p transfers of stage " << e.bottleneck_stage;
  else what << "compute of stage " << e.bottleneck_stage;
  return {what.str(), st.forward_s + st.backward_s + send};
}

result<simulator::sim_context> make_context(const problem& prob) {
  simulator::sim_inputs in;
  in.model = prob.model;
  in.profile = &prob.profile;
  in.gpus = prob.cluster.gpus;
  in.cluster = &prob.cluster;
  in.network = prob.network ? &*prob.network : nullptr;
  in.job = prob.job;
  return simulator::sim_context::make(in, prob.sim);
}

result<estimate> estimate_plan(const problem& prob, const config::plan& p) {
  auto ctx = make_context(prob);
  if (!ctx) return ctx.error();
  detail::tables tab(prob, *ctx);
  detail::network net(*ctx);
  return detail::estimate_with(prob, tab, net, p);
}

}  // namespace sailor::planner
