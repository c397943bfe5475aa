#include "stage_program.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "local_sgd.hpp"

namespace sailor::planner::detail {

stage_program::stage_program(const search_space& space, const network& net) : space_(space), net_(net) {
  const auto& job = space.prob().job;
  if (job.limits.max_cost_per_hour_usd) limits_.usd_cap_per_s = *job.limits.max_cost_per_hour_usd / 3600.0;
  if (job.limits.min_iterations_per_s && *job.limits.min_iterations_per_s > 0)
    limits_.time_cap = 1.0 / *job.limits.min_iterations_per_s;
  limits_.need_usd = space.cost_goal() || std::isfinite(limits_.usd_cap_per_s) ||
                     job.limits.max_cost_per_iteration_usd.has_value();
}

std::vector<stage_option> stage_program::stage_options(const zone_set& zs, int mbs, int replicas,
                                                       const std::array<int, max_gpu_types>& budgets) const {
  const auto& tab = space_.tab();
  const int D = replicas;
  std::vector<stage_option> out;
  for (int g = 0; g < space_.gpu_types(); ++g) {
    const int budget = budgets[size_t(g)];
    if (budget == 0) continue;
    for (int t : tab.tps(g, mbs)) {
      if (t > budget) continue;
      // The ring as stage-major placement would lay it out: zones filled in order.
      const auto& gname = tab.gpu_names()[size_t(g)];
      std::vector<simulator::endpoint> ring;
      std::vector<int> left(size_t(space_.num_zones()), 0);
      for (int z : zs.zones) left[size_t(z)] = space_.available(g, z);
      int zfirst = -1;
      for (int z : zs.zones)
        if (left[size_t(z)] >= D * t) { zfirst = z; break; }
      for (int i = 0; i < D; ++i) {
        int zp = zfirst;
        if (zp < 0)
          for (int z : zs.zones)
            if (left[size_t(z)] >= t) { zp = z; break; }
        if (zp < 0) zp = zs.zones[0];
        left[size_t(zp)] -= t;
        ring.push_back(net_.endpoint_of(space_.zone_name(zp), gname, t));
      }
      const double full = D > 1 ? ring_sync_s(ring, tab.stage_params(0, space_.num_layers())) : 0;
      if (full < 0) continue;
      const auto& ep = ring.front();
      const double send = tab.context().transfer_s(ep, ep, tab.context().activation_bytes(mbs));
      // GPUs of this type usable at this TP: replicas do not span zones (nor nodes).
      int usable = 0;
      for (int z : zs.zones) usable += t * (space_.available(g, z) / t);
      const int k = std::min(budget, usable / D);
      if (k < t) continue;
      out.push_back({tab.find(g, t, mbs), g, t, full, std::max(0.0, send), k});
    }
  }
  return out;
}

double stage_program::ring_sync_s(const std::vector<simulator::endpoint>& ring, double params) const {
  const double whole = net_.allreduce_s(ring, params);
  if (!may_join_regions(space_.prob().job) || whole < 0) return whole;
  // The plan may run DiLoCo across regions: then each region's replicas synchronise among
  // themselves every iteration, and the slowest region's ring is what the program should see
  // (the exchange across regions, amortised, is left to the closed form).
  std::vector<std::string> regions;
  for (const auto& e : ring) {
    auto name = space_.region_of(space_.zone_index(space_.tab().context().zone_name(e.zone)));
    if (std::find(regions.begin(), regions.end(), name) == regions.end()) regions.push_back(std::move(name));
  }
  if (regions.size() < 2) return whole;
  double slowest = 0;
  std::vector<simulator::endpoint> mine;
  for (const auto& region : regions) {
    mine.clear();
    for (const auto& e : ring)
      if (space_.region_of(space_.zone_index(space_.tab().context().zone_name(e.zone))) == region) mine.push_back(e);
    const double s = mine.size() > 1 ? net_.allreduce_s(mine, params) : 0.0;
    if (s < 0) return whole;
    slowest = std::max(slowest, s);
  }
  return std::min(whole, slowest);
}

std::vector<double>& stage_program::memory_memo(const config_table& tb) {
  auto& memo = memory_memo_[&tb];
  const size_t n1 = size_t(space_.num_layers()) + 1;
  if (memo.empty()) memo.assign(n1 * n1 * 4, std::numeric_limits<double>::quiet_NaN());
  return memo;
}

double stage_program::memory(std::vector<double>& memo, const config_table& tb, int a, int e, bool recompute,
                             int in_flight) const {
  const size_t n1 = size_t(space_.num_layers()) + 1;
  double& v = memo[((size_t(a) * n1 + size_t(e)) * 2 + (recompute ? 1 : 0)) * 2 + size_t(in_flight - 1)];
  if (std::isnan(v)) v = space_.tab().stage_memory(tb, a, e, recompute, in_flight);
  return v;
}

void stage_program::extend(int l, const std::vector<stage_option>& opts, int m, int replicas, double thr) {
  const auto& tab = space_.tab();
  const auto& job = space_.prob().job;
  const int n = space_.num_layers();
  const bool cost_goal = space_.cost_goal();
  const bool allow_rc = job.allow_recompute;
  const double total_params = std::max(1.0, tab.stage_params(0, n));
  for (int ci = 0; ci < int(opts.size()); ++ci) {
    const auto& c = opts[size_t(ci)];
    const auto& tb = *c.table;
    const double cap = tab.memory_bytes(c.gpu);
    auto& memo = memory_memo(tb);
    for (int e = l + 1; e <= n; ++e) {
      const double t0 = tb.time(l, e, false);
      const double t1 = tb.time(l, e, true);
      if (!cost_goal && 0.97 * m * t0 >= thr && (!allow_rc || 0.97 * m * t1 >= thr)) break;
      if (0.97 * m * t0 > limits_.time_cap) break;
      const double m0_one = memory(memo, tb, l, e, false, 1);
      const double m1_one = allow_rc ? memory(memo, tb, l, e, true, 1) : infinity;
      if (m0_one > cap && m1_one > cap) break;
      const double per_mb0 = memory(memo, tb, l, e, false, 2) - m0_one;
      const double per_mb1 = allow_rc ? memory(memo, tb, l, e, true, 2) - m1_one : 0;
      const double sync = c.sync_full_s * tab.stage_params(l, e) / total_params;
      const double tail_c = sync + tb.update(l, e);
      const double link = (e < n ? c.send_s : 0.0) + (l > 0 ? c.send_s : 0.0);
      const auto [from, to] = sets_.range(e);
      for (int xi = from; xi < to; ++xi) {
        const partial_pipeline& x = sets_[xi];
        if (x.use[size_t(c.gpu)] + c.tp > c.budget) continue;
        if (x.stages + 1 > space_.max_stages()) continue;
        const int in_flight = std::min(m, x.stages + 1);
        bool rc = false;
        double t = t0;
        if (m0_one + per_mb0 * (in_flight - 1) > cap) {
          if (!allow_rc || m1_one + per_mb1 * (in_flight - 1) > cap) continue;
          rc = true;
          t = t1;
        }
        // The figures first, the candidate (large) only for what survives the pruning.
        const double max_t = std::max(x.max_t, t + link);
        const double sum_t = x.sum_t + t + link;
        const double key = (m - 1) * max_t + sum_t + std::max(x.tail, tail_c);
        // What the rest of the pipeline cannot make smaller: prune on it, with a margin for
        // the simulator's finer accounting (sends, the drain of later stages).
        const double bound = 0.97 * ((m - 1) * max_t + sum_t);
        if (bound > limits_.time_cap) continue;
        if (!cost_goal && 0.98 * key >= thr) continue;
        double usd_s = 0;
        if (limits_.need_usd) {
          for (int g = 0; g < space_.gpu_types(); ++g)
            usd_s += (x.use[size_t(g)] + (g == c.gpu ? c.tp : 0)) * tab.usd_per_gpu_s(g);
          usd_s *= replicas;
          if (usd_s > limits_.usd_cap_per_s) continue;
          if (job.limits.max_cost_per_iteration_usd && key * usd_s > *job.limits.max_cost_per_iteration_usd)
            continue;
          if (cost_goal && key * usd_s >= thr) continue;
        }
        partial_pipeline& y = candidates_.emplace_back(x);
        y.use[size_t(c.gpu)] = std::int16_t(y.use[size_t(c.gpu)] + c.tp);
        y.stages = std::int16_t(x.stages + 1);
        y.end = std::int16_t(e);
        y.option = std::int16_t(ci);
        y.recompute = rc;
        y.rest = xi;
        y.max_t = max_t;
        y.sum_t = sum_t;
        y.tail = std::max(x.tail, tail_c);
        y.key = key;
        y.rank = cost_goal ? key * usd_s : key;
      }
    }
  }
}

pipeline_shape stage_program::shape_of(int index, const std::vector<stage_option>& opts) const {
  pipeline_shape shape;
  int a = 0;
  for (int k = index; k > 0 && sets_[k].option >= 0; k = sets_[k].rest) {
    const partial_pipeline& y = sets_[k];
    const auto& c = opts[size_t(y.option)];
    shape.push_back({a, y.end, c.gpu, c.tp, y.recompute});
    a = y.end;
  }
  return shape;
}

std::vector<pipeline_found> stage_program::run(const std::vector<stage_option>& opts, int mbs, int replicas,
                                               double threshold, search_stats& stats) {
  const int n = space_.num_layers();
  const int m = space_.micro_batches(mbs, replicas);
  sets_.reset(n);
  for (int l = n - 1; l >= 0; --l) {
    candidates_.clear();
    extend(l, opts, m, replicas, threshold);
    stats.dp_states += static_cast<long long>(candidates_.size());
    sets_.keep_best(l, candidates_, space_.opts().beam_width, space_.gpu_types());
  }
  std::vector<pipeline_found> out;
  const auto [from, to] = sets_.range(0);
  for (int xi = from; xi < to; ++xi) out.push_back({shape_of(xi, opts), sets_[xi].rank});
  return out;
}

}  // namespace sailor::planner::detail
