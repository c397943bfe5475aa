#pragma once
// Private: per-stage times shared by the closed form and the event simulation, so that both
// run on the same physics and differ only in how they schedule.
#include "sailor/simulator/simulator.hpp"

namespace sailor::simulator {

struct stage_times {
  double forward_s = 0, backward_s = 0, update_s = 0;  // slowest replica, per micro-batch
  double send_forward_s = 0;   // activation to stage s+1
  double send_backward_s = 0;  // gradient to stage s-1
  double allreduce_s = 0;
  int micro_batches = 1;
  int slowest = 0;
  bool analytic = false;
};

struct pipeline_times {
  double round_trip_s = 0, steady_s = 0, pipeline_s = 0, iteration_s = 0;
  int bottleneck = 0;
};

int micro_batches_of(const resolved_plan& p, int s);
/// How much slower each rank computes when the plan's ranks share a host's cores (1: not).
double host_slowdown(const sim_context& ctx, const resolved_plan& p);
stage_times compute_stage_times(const sim_context& ctx, const resolved_plan& p, int s);
pipeline_times combine(const sim_context& ctx, const stage_times* t, int num_stages);
/// The all-reduce over every rank that ends an iteration (sim_options::final_allreduce), 0
/// when off.
double final_allreduce_s(const sim_context& ctx, const resolved_plan& p);
/// The iteration when ranks share a host's cores (sim_options::host_cores): at least their
/// CPU work over the cores plus the waits no work can fill; 0 when off.
double cpu_bound_s(const sim_context& ctx, const resolved_plan& p, const stage_times* t);
/// The iteration time from the schedule's: adds the final all-reduce, and takes the host's
/// CPU bound when it is longer.
double finish_iteration(const sim_context& ctx, const resolved_plan& p, const stage_times* t,
                        double schedule_iteration_s);

}  // namespace sailor::simulator
