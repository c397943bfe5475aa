// DiLoCo across regions (config::plan::local_sgd) in the closed form: the regions' inner
// iterations, each with its own pipelines and data-parallel all-reduce, and every inner_steps
// iterations the all-reduce of the parameter deltas across regions, overlapped with the next
// inner iterations (data_parallel.overlap_steps) and cut into fragments.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "stage_times.hpp"

namespace sailor::simulator {

status resolve_regions(const config::plan& p, resolved_plan& out) {
  if (!p.local_sgd) return std::nullopt;
  const auto& l = *p.local_sgd;
  if (l.inner_steps < 1) return error::invalid_input("local_sgd.inner_steps", "expected a positive number of iterations");
  out.inner_steps = l.inner_steps;
  out.num_regions = std::max<int>(1, int(l.regions.size()));
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& rs = out.stages[s];
    for (size_t r = 0; r < p.stages[s].replicas.size(); ++r) {
      const bool same_zone = r > 0 && p.stages[s].replicas[r].zone == p.stages[s].replicas[r - 1].zone;
      const int region = same_zone ? rs.replicas[r - 1].region : l.region_of(p.stages[s].replicas[r].zone);
      if (region < 0)
        return error::invalid_input("stages[" + std::to_string(s) + "].replicas[" + std::to_string(r) + "].zone",
                                    "zone '" + p.stages[s].replicas[r].zone + "' is in no region of local_sgd");
      rs.replicas[r].region = region;
    }
  }
  // The simulator pairs replica i of a stage with replica i (mod count) of the next.
  for (int s = 0; s + 1 < out.num_stages; ++s) {
    const auto& a = out.stages[s];
    const auto& b = out.stages[s + 1];
    for (int i = 0; i < std::max(a.num_replicas, b.num_replicas); ++i)
      if (a.replicas[i % a.num_replicas].region != b.replicas[i % b.num_replicas].region)
        return error::invalid_input("local_sgd.regions",
                                    "replica " + std::to_string(i % a.num_replicas) + " of stage " + std::to_string(s) +
                                        " sends to a replica in another region: under DiLoCo every pipeline stays "
                                        "inside its region");
  }
  return std::nullopt;
}

const endpoint* replicas_in(const resolved_plan::stage& st, int region, int& n) {
  if (region < 0) {
    n = st.num_replicas;
    return st.replicas.data();
  }
  thread_local std::vector<endpoint> group;
  group.clear();
  for (const endpoint& e : st.replicas)
    if (e.region == region) group.push_back(e);
  n = int(group.size());
  return group.data();
}

pipeline_times iteration_times(const sim_context& ctx, const resolved_plan& p, stage_times* t) {
  const int S = p.num_stages;
  if (p.inner_steps <= 0) {
    for (int s = 0; s < S; ++s) t[s] = compute_stage_times(ctx, p, s);
    pipeline_times pt = combine(ctx, t, S);
    pt.iteration_s = finish_iteration(ctx, p, t, pt.iteration_s);
    return pt;
  }
  // Each region on its own; the slowest sets the pace (the exchange waits for every region).
  pipeline_times slowest;
  slowest.iteration_s = -1;
  stage_times mine[resolved_plan::max_stages];
  for (int region = 0; region < p.num_regions; ++region) {
    for (int s = 0; s < S; ++s) mine[s] = compute_stage_times(ctx, p, s, region);
    pipeline_times pt = combine(ctx, mine, S);
    pt.iteration_s = finish_iteration(ctx, p, mine, pt.iteration_s);
    if (pt.iteration_s > slowest.iteration_s) {
      slowest = pt;
      std::copy(mine, mine + S, t);
    }
  }
  return slowest;
}

double sync_egress_usd(const sim_context& ctx, const resolved_plan& p, int s) {
  const auto& st = p.stages[s];
  const bool diloco = p.inner_steps > 0;
  double usd = 0;
  for (int region = diloco ? 0 : -1; region < (diloco ? p.num_regions : 0); ++region) {
    int n = 0;
    const endpoint* group = replicas_in(st, region, n);
    bool multi_zone = false;
    for (int r = 1; r < n; ++r) multi_zone = multi_zone || group[r].zone != group[0].zone;
    if (multi_zone) usd += ctx.allreduce_egress_usd(group, n, ctx.params_per_gpu(1, st.first, st.end));
  }
  return usd;
}

namespace {
// Bytes per parameter of the outer exchange: fp32 deltas, or int8 with an fp32 scale per block.
double exchange_bytes_per_param(const sim_context& ctx) {
  if (ctx.job().data_parallel.compression == config::delta_compression::int8)
    return 1.0 + 4.0 / std::max(1.0, ctx.options().int8_block_values);
  return 4.0;
}

struct stage_exchange {
  double seconds = 0, egress_usd = 0, egress_bytes = 0;
};

// One stage's exchange as the runtime runs it (train/src/local_sgd.cpp): each region's leader
// (its first replica of the stage) all-reduces the deltas with the other regions' leaders (int8:
// an all-gather, every other leader's payload in), then broadcasts the mean to the region's other
// replicas (a binomial tree). `units`: the buffer in gradient elements (allreduce_s's unit).
stage_exchange exchange_of_stage(const sim_context& ctx, const resolved_plan& p, int s, double units) {
  const auto& st = p.stages[s];
  const auto& o = ctx.options();
  thread_local std::vector<endpoint> leaders;
  leaders.assign(size_t(p.num_regions), endpoint{});
  std::vector<char> found(size_t(p.num_regions), 0);
  for (const endpoint& e : st.replicas)
    if (!found[size_t(e.region)]) found[size_t(e.region)] = 1, leaders[size_t(e.region)] = e;
  const int n = p.num_regions;
  const bool gather = ctx.job().data_parallel.compression == config::delta_compression::int8;
  // A ring all-gather of n payloads moves (n-1)/n of n payloads per member: a ring all-reduce of
  // n/2 times the buffer (the same for two regions).
  const double moved = gather ? units * n / 2.0 : units;
  stage_exchange x;
  x.seconds = std::max(0.0, ctx.allreduce_s(leaders.data(), n, moved));
  x.egress_usd = ctx.allreduce_egress_usd(leaders.data(), n, moved);
  const double buffer = units * o.grad_bytes_per_param;  // the whole stage's, all TP shards
  x.egress_bytes = 2.0 * (n - 1) * buffer * (gather ? n / 2.0 : 1.0);
  double broadcast_s = 0;
  for (int r = 0; r < n; ++r) {
    const endpoint& leader = leaders[size_t(r)];
    const double per_gpu = buffer / std::max(1, leader.tp);
    int members = 0;  // the region's replicas besides its leader
    bool leader_seen = false;
    double bw = 1e300;
    thread_local std::vector<int> zones;  // the region's zones a copy has entered
    zones.clear();
    for (const endpoint& e : st.replicas) {
      if (e.region != r) continue;
      if (!leader_seen) {
        leader_seen = true;
        continue;
      }
      ++members;
      const double b = ctx.gpu_bytes_per_s(leader, e, per_gpu);
      if (b > 0) bw = std::min(bw, b);
      // One copy enters each other zone of the region (the broadcast's tree spreads it there).
      if (e.zone != leader.zone && std::find(zones.begin(), zones.end(), e.zone) == zones.end()) {
        zones.push_back(e.zone);
        x.egress_usd += buffer / 1e9 * ctx.egress_usd_per_gb(leader.zone, e.zone);
        x.egress_bytes += buffer;
      }
    }
    if (members == 0 || bw >= 1e300) continue;  // the leader alone
    const double rounds = std::ceil(std::log2(double(members + 1)));
    broadcast_s = std::max(broadcast_s, rounds * (per_gpu / bw + o.collective_latency_s));
  }
  x.seconds += broadcast_s;
  return x;
}
}  // namespace

outer_exchange outer_exchange_of(const sim_context& ctx, const resolved_plan& p, const stage_times* t,
                                 double inner_iteration_s) {
  outer_exchange x;
  if (p.inner_steps <= 0) return x;
  const auto& dp = ctx.job().data_parallel;
  const auto& o = ctx.options();
  const int fragments = std::max(1, dp.fragments);
  const double H = p.inner_steps;
  // allreduce_s counts gradient elements of grad_bytes_per_param bytes: the exchange's bytes in
  // those units price it over the same all-reduce, on the same links.
  const double units_per_param = exchange_bytes_per_param(ctx) / std::max(1e-9, o.grad_bytes_per_param);
  double fragment_s = 0, outer_step_s = 0;
  for (int s = 0; s < p.num_stages; ++s) {
    const auto& st = p.stages[s];
    const double units = ctx.params_per_gpu(1, st.first, st.end) * units_per_param;
    // The stages exchange side by side; each fragment holds 1/fragments of every stage's layers.
    fragment_s = std::max(fragment_s, exchange_of_stage(ctx, p, s, units / fragments).seconds);
    const stage_exchange whole = exchange_of_stage(ctx, p, s, units);
    x.egress_usd += whole.egress_usd / H;
    x.egress_bytes += whole.egress_bytes / H;
    // The outer step reads and writes the parameters, their anchor and the momentum (fp32),
    // memory bound like the inner optimizer's step.
    outer_step_s = std::max(outer_step_s, t[s].update_s * 2 * (4 + o.outer_state_bytes_per_param) /
                                              std::max(1.0, o.optimizer_bytes_per_param));
  }
  const double hidden = std::max(0, dp.overlap_steps) * inner_iteration_s;
  x.exchange_s = fragments * fragment_s;
  x.exposed_s = (fragments * std::max(0.0, fragment_s - hidden) + outer_step_s) / H;
  return x;
}

double outer_state_bytes(const sim_context& ctx, const resolved_plan& p, int s, int tp) {
  if (p.inner_steps <= 0) return 0;
  return ctx.options().outer_state_bytes_per_param * ctx.params_per_gpu(tp, p.stages[s].first, p.stages[s].end);
}

}  // namespace sailor::simulator
