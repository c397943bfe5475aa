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
/// Stage s's times; with `region` >= 0, of that region's replicas alone (DiLoCo: its own
/// pipelines and its own data-parallel all-reduce).
stage_times compute_stage_times(const sim_context& ctx, const resolved_plan& p, int s, int region = -1);
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


// DiLoCo across regions (local_sgd.cpp). Without local_sgd (inner_steps 0) each is the
// synchronous plan's figure.

/// Marks each replica's region from `p.local_sgd` (nothing without it): an error names a zone
/// in no region, or a pipeline that crosses regions.
status resolve_regions(const config::plan& p, resolved_plan& out);
/// The replicas of `st` in `region` (all when region < 0), contiguous: `st`'s own storage or
/// a per-thread buffer valid until the next call on this thread; `n` their count.
const endpoint* replicas_in(const resolved_plan::stage& st, int region, int& n);
/// The stage times (into `t`) and pipeline of an iteration: the whole plan's, or under DiLoCo
/// the slowest region's inner iteration (the final all-reduce and host bound included).
pipeline_times iteration_times(const sim_context& ctx, const resolved_plan& p, stage_times* t);
/// Egress $ per iteration of stage s's data-parallel all-reduce (each region's under DiLoCo).
double sync_egress_usd(const sim_context& ctx, const resolved_plan& p, int s);
/// The outer exchange of a DiLoCo plan (all zero without local_sgd).
struct outer_exchange {
  double exchange_s = 0;   // the parameter deltas all-reduced across regions, all fragments
  double exposed_s = 0;    // per iteration: what the overlap leaves of it, plus the outer step
  double egress_usd = 0;   // per iteration
  double egress_bytes = 0; // per iteration
};
outer_exchange outer_exchange_of(const sim_context& ctx, const resolved_plan& p, const stage_times* t,
                                 double inner_iteration_s);
/// DiLoCo's extra memory per GPU of a replica of stage s (sim_options::outer_state_bytes_per_param).
double outer_state_bytes(const sim_context& ctx, const resolved_plan& p, int s, int tp);

}  // namespace sailor::simulator
