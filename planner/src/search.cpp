// The search: for each zone set, micro-batch size and data-parallel degree worth trying, a
// dynamic program over layers (from the last back) with a bounded Pareto set per layer boundary;
// complete pipelines are placed on zones and scored by the closed form.
//
// Pruning, in the order it bites:
//  - (zone set, micro-batch, DP degree) are visited in order of a lower bound on the iteration
//    time (all GPUs of the pipeline busy at their best efficiency) and cut by the best plan so far;
//  - DP degrees that give the same per-pipeline GPU budget as the next larger one are skipped
//    for throughput (the larger one has fewer micro-batches for the same pipeline);
//  - a stage's layer range stops growing when it no longer fits memory (memory grows with the
//    range) or when its time alone already exceeds the best plan;
//  - TP only inside a node and only at profiled degrees; recomputation only where the stage
//    would not fit without it (it only costs time);
//  - at most `beam_width` non-dominated partial pipelines per layer boundary;
//  - a complete pipeline is placed only if its estimate, times the smallest ratio of placed
//    value to estimate seen in its configuration (zones make the estimate optimistic), can
//    still beat the best plan.
// Then hill climbing from the best plans kept (see polish()) repairs what the program cannot
// see: cross-zone sends, egress, degrees that differ by stage.

#include "search.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace sailor::planner::detail {

namespace {

constexpr int max_types = 8;
constexpr double inf = std::numeric_limits<double>::infinity();

struct entry {
  std::array<std::int16_t, max_types> use{};  // GPUs per pipeline, per type
  std::int16_t stages = 0;                    // stages from this boundary to the end
  std::int16_t end = 0;                       // end layer of this entry's first stage
  std::int16_t cfg = -1;                      // its configuration
  bool recompute = false;
  int parent = -1;  // entry (in the pool) the rest of the pipeline continues with
  double max_t = 0, sum_t = 0, tail = 0;
  double key = 0;   // partial iteration time
  double rank = 0;  // what the beam keeps the best of (time or cost)
};

struct stage_cfg {
  const config_table* table;
  int gpu;
  int tp;
  double sync_full_s;  // all-reduce of the whole model's gradients among the D replicas
  double send_s;       // one activation to a neighbour stage
  int budget;          // GPUs of its type one pipeline may use when stages of this TP use them
};

struct zone_set {
  std::vector<int> zones;  // placement order: capacity first
  std::vector<int> capacity;  // per type, summed
};

// A pipeline template: per stage (first, end, gpu, tp, recompute).
struct stage_shape {
  int first, end, gpu, tp;
  bool recompute;
};

std::string canonical(const config::plan& p) {
  std::string o;
  size_t n = 16;
  for (const auto& s : p.stages) {
    n += 16;
    for (const auto& r : s.replicas) n += r.gpu_type.size() + r.zone.size() + 6;
  }
  o.reserve(n);
  o += std::to_string(p.micro_batch);
  o += '|';
  for (const auto& s : p.stages) {
    o += std::to_string(s.first_layer);
    o += ':';
    o += std::to_string(s.num_layers);
    o += s.recompute ? 'r' : '-';
    o += '[';
    for (const auto& r : s.replicas) {
      o += r.gpu_type;
      o += '/';
      o += r.zone;
      o += '/';
      o += std::to_string(r.tp);
      o += ',';
    }
    o += ']';
  }
  return o;
}

class searcher {
public:
  searcher(const problem& prob, const tables& tab, const network& net, const options& opts,
           int keep, double slack, search_stats& stats)
      : prob_(prob), tab_(tab), net_(net), opts_(opts), keep_(keep), slack_(slack), stats_(stats) {
    G_ = std::min<int>(int(tab.gpu_names().size()), max_types);
    for (const auto& z : prob.cluster.zones) {
      bool any = false;
      for (const auto& [g, n] : z.gpus)
        if (n > 0 && tab.gpu_index(g) >= 0) any = true;
      if (any) zone_names_.push_back(z.name);
    }
    avail_.assign(G_, std::vector<int>(zone_names_.size(), 0));
    for (size_t zi = 0; zi < zone_names_.size(); ++zi) {
      const auto* z = prob.cluster.find_zone(zone_names_[zi]);
      for (const auto& [g, n] : z->gpus) {
        int gi = tab.gpu_index(g);
        if (gi >= 0 && gi < G_) avail_[gi][zi] += n;
      }
    }
    n_ = tab.num_layers();
    gbs_ = prob.job.global_batch;
    cost_goal_ = prob.job.goal == config::objective::min_cost;
    max_stages_ = opts.max_stages > 0 ? std::min(opts.max_stages, n_) : n_;
    max_stages_ = std::min(max_stages_, simulator::resolved_plan::max_stages);
  }

  std::vector<candidate> run() {
    if (G_ == 0 || zone_names_.empty() || gbs_ <= 0) return {};
    build_zone_sets();
    struct combo {
      double order, lb;
      int zs, mbs, dp;
    };
    std::vector<combo> combos;
    for (int zs = 0; zs < int(zone_sets_.size()); ++zs) {
      for (int b : tab_.micro_batches()) {
        int dmax = std::min(std::max(1, gbs_ / b), simulator::resolved_plan::max_replicas);
        std::vector<int> dps;
        for (int D = 1; D <= dmax; ++D) {
          if (budget_total(zs, D) == 0) break;
          if (!cost_goal_ && D < dmax && same_budget(zs, D, D + 1)) continue;
          // For throughput, a degree with as many micro-batches per replica as the next smaller
          // one is no faster (same schedule, a smaller budget per pipeline, a longer ring). Up
          // to 64 every degree is tried all the same (the beam and the mixed-type augmentation
          // are heuristics, and do find better plans there now and then).
          if (!cost_goal_ && D > 64 && micro_batches(b, D) == micro_batches(b, D - 1)) continue;
          if (cost_goal_ && D > 32 && !(D == dmax || (gbs_ / b) % D == 0 || D % 8 == 0)) continue;
          dps.push_back(D);
        }
        for (int D : dps)
          combos.push_back({lower_bound_time(zs, b, D, true), lower_bound_time(zs, b, D), zs, b, D});
      }
    }
    std::stable_sort(combos.begin(), combos.end(), [](const combo& a, const combo& b) {
      return std::tie(a.order, a.zs, a.mbs, a.dp) < std::tie(b.order, b.zs, b.mbs, b.dp);
    });
    for (const auto& c : combos) {
      if (!std::isfinite(c.lb)) continue;
      if (!cost_goal_ && c.lb >= threshold()) continue;
      if (cost_goal_ && prob_.job.limits.min_iterations_per_s &&
          c.lb > 1.0 / *prob_.job.limits.min_iterations_per_s)
        continue;
      ++stats_.configurations;
      run_dp(c.zs, c.mbs, c.dp);
    }
    polish();
    return std::move(best_);
  }

private:
  // --- zone sets -----------------------------------------------------------------------------
  int zone_capacity(int zi) const {
    int n = 0;
    for (int g = 0; g < G_; ++g) n += avail_[g][zi];
    return n;
  }

  void add_zone_set(std::vector<int> zones) {
    std::sort(zones.begin(), zones.end(), [&](int a, int b) {
      int ca = zone_capacity(a), cb = zone_capacity(b);
      return ca != cb ? ca > cb : zone_names_[a] < zone_names_[b];
    });
    for (const auto& z : zone_sets_) {
      auto x = z.zones, y = zones;
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      if (x == y) return;
    }
    zone_set s;
    s.zones = zones;
    s.capacity.assign(G_, 0);
    for (int g = 0; g < G_; ++g)
      for (int z : zones) s.capacity[g] += avail_[g][z];
    zone_sets_.push_back(std::move(s));
  }

  std::string region_of(int zi) const {
    const auto* z = prob_.cluster.find_zone(zone_names_[zi]);
    return z ? z->region : zone_names_[zi];
  }

  // Zone sets, pruned by region and bandwidth before any is searched (a cloud lists well over
  // a hundred zones; the sets searched grow with the logarithm of the regions, not with them):
  // all zones; the two largest zones alone; the largest multi-zone regions alone (the three
  // with most GPUs, and the one with most of each GPU type); and regions added outwards from
  // the largest in order of bandwidth (ties: capacity) at 2, 3, 4, 6, 9, 13, ... regions.
  void build_zone_sets() {
    const int Z = int(zone_names_.size());
    std::vector<int> all(Z);
    for (int z = 0; z < Z; ++z) all[z] = z;
    add_zone_set(all);
    if (!opts_.zone_subsets || Z == 1) return;
    std::vector<int> by_size = all;
    std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) { return zone_capacity(a) > zone_capacity(b); });
    for (int i = 0; i < std::min(Z, 2); ++i) add_zone_set({by_size[i]});
    std::map<std::string, std::vector<int>> regions;
    for (int z = 0; z < Z; ++z) regions[region_of(z)].push_back(z);
    std::vector<std::pair<std::string, std::vector<int>>> order(regions.begin(), regions.end());
    auto cap = [&](const std::vector<int>& zs, int g) {
      int n = 0;
      for (int z : zs) n += g < 0 ? zone_capacity(z) : avail_[g][z];
      return n;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](const auto& a, const auto& b) { return cap(a.second, -1) > cap(b.second, -1); });
    constexpr int largest_regions = 3;
    for (int i = 0; i < int(order.size()) && i < largest_regions; ++i)
      if (order[i].second.size() > 1) add_zone_set(order[i].second);
    for (int g = 0; g < G_; ++g) {
      const auto* most = &order[0];
      for (const auto& r : order)
        if (cap(r.second, g) > cap(most->second, g)) most = &r;
      if (most->second.size() > 1 && cap(most->second, g) > 0) add_zone_set(most->second);
    }
    if (order.size() < 2) return;
    // Outwards from the largest region, the best-connected first.
    const std::string& first_zone = zone_names_[order[0].second[0]];
    std::vector<double> bw_of(order.size(), 0);
    for (size_t i = 1; i < order.size(); ++i)
      bw_of[i] = 1.0 / std::max(1e-12, prob_.cluster.link(first_zone, zone_names_[order[i].second[0]]).transfer_s(1e9));
    std::vector<size_t> rest;
    for (size_t i = 1; i < order.size(); ++i) rest.push_back(i);
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return bw_of[a] > bw_of[b]; });
    std::vector<int> acc = order[0].second;
    size_t next_size = 2;
    for (size_t k = 0; k + 1 < rest.size(); ++k) {  // the last step is `all`, added above
      const auto& zs = order[rest[k]].second;
      acc.insert(acc.end(), zs.begin(), zs.end());
      const size_t regions_in = k + 2;
      if (regions_in < next_size) continue;
      add_zone_set(acc);
      next_size = regions_in < 4 ? regions_in + 1 : regions_in + regions_in / 2;
    }
  }

  // --- budgets and bounds ----------------------------------------------------------------------
  int budget(int zs, int g, int D) const {
    int cap_layers = n_ * tab_.gpus_per_node(g);
    return std::min(zone_sets_[zs].capacity[g] / D, cap_layers);
  }
  int budget_total(int zs, int D) const {
    int n = 0;
    for (int g = 0; g < G_; ++g) n += budget(zs, g, D);
    return n;
  }
  bool same_budget(int zs, int D1, int D2) const {
    for (int g = 0; g < G_; ++g)
      if (budget(zs, g, D1) != budget(zs, g, D2)) return false;
    return true;
  }
  // As the simulator counts them: the busiest replica's share, in micro-batches.
  int micro_batches(int b, int D) const {
    int per_replica = (gbs_ + D - 1) / D;
    return std::max(1, (per_replica + b - 1) / b);
  }

  // A pipeline's steady state runs at the pace of its bottleneck, so its speed (models per
  // second, 1 / the time of one micro-batch through all its layers) is at most the sum of its
  // stages' speeds; that sum is bounded both by the GPUs (each busy at its type's best
  // efficiency) and by the stages (at most max_stages_, none faster than the fastest replica).
  // The first micro-batch also crosses every layer once. m micro-batches: at least
  // (m - 1) / speed + that crossing. 10% below, as layers differ a little in their relative
  // speed by type.
  double lower_bound_time(int zs, int b, int D, bool for_order = false) const {
    double cap = 0, fastest = 0;
    for (int g = 0; g < G_; ++g) {
      int K = budget(zs, g, D);
      if (K == 0) continue;
      double eff = inf;
      for (int t : tab_.tps(g, b)) {
        if (t > K) continue;
        const double whole = tab_.find(g, t, b)->time(0, n_, false);
        eff = std::min(eff, t * whole);
        if (whole > 0) fastest = std::max(fastest, 1.0 / whole);
      }
      if (std::isfinite(eff) && eff > 0) cap += K / eff;
    }
    if (cap <= 0 || fastest <= 0) return inf;
    // Minimum cost visits configurations in the order of the GPUs' bound alone (it reaches
    // cheap plans sooner); the bound itself (for the throughput floor) is the tighter one.
    if (for_order && cost_goal_) return 0.9 * micro_batches(b, D) / cap;
    cap = std::min(cap, max_stages_ * fastest);
    return 0.9 * ((micro_batches(b, D) - 1) / cap + 1.0 / fastest);
  }

  double threshold() const {
    if (best_.empty() || !best_.front().feasible) return inf;
    double v = best_.back().value;
    if (int(best_.size()) < keep_) v = best_.front().value * (1 + slack_);
    return std::min(v, best_.front().value * (1 + slack_));
  }

  // --- the dynamic program -------------------------------------------------------------------
  // tables::stage_memory for one or two micro-batches in flight, remembered per table: the
  // program asks the same (table, layer range) in every configuration that uses the table.
  std::vector<double>& memory_memo(const config_table& tb) {
    auto& memo = memory_memo_[&tb];
    const size_t n1 = size_t(n_) + 1;
    if (memo.empty()) memo.assign(n1 * n1 * 4, std::numeric_limits<double>::quiet_NaN());
    return memo;
  }
  double dp_memory(std::vector<double>& memo, const config_table& tb, int a, int e, bool recompute,
                   int in_flight) const {
    const size_t n1 = size_t(n_) + 1;
    double& v = memo[((size_t(a) * n1 + size_t(e)) * 2 + (recompute ? 1 : 0)) * 2 + size_t(in_flight - 1)];
    if (std::isnan(v)) v = tab_.stage_memory(tb, a, e, recompute, in_flight);
    return v;
  }

  void run_dp(int zs, int b, int D) {
    const zone_set& zset = zone_sets_[zs];
    const int m = micro_batches(b, D);
    std::array<int, max_types> K{};
    for (int g = 0; g < G_; ++g) K[g] = budget(zs, g, D);
    std::vector<stage_cfg> cfgs;
    for (int g = 0; g < G_; ++g) {
      if (K[g] == 0) continue;
      // The ring as stage-major placement would lay it out: zones filled in order.
      for (int t : tab_.tps(g, b)) {
        if (t > K[g]) continue;
        const auto* tbl = tab_.find(g, t, b);
        const auto& gname = tab_.gpu_names()[g];
        std::vector<simulator::endpoint> ring;
        std::vector<int> left(zone_names_.size(), 0);
        for (int z : zset.zones) left[z] = avail_[g][z];
        int zfirst = -1;
        for (int z : zset.zones)
          if (left[z] >= D * t) { zfirst = z; break; }
        for (int i = 0; i < D; ++i) {
          int zp = zfirst;
          if (zp < 0)
            for (int z : zset.zones)
              if (left[z] >= t) { zp = z; break; }
          if (zp < 0) zp = zset.zones[0];
          left[zp] -= t;
          ring.push_back(net_.endpoint_of(zone_names_[zp], gname, t));
        }
        double full = D > 1 ? net_.allreduce_s(ring, tab_.stage_params(0, n_)) : 0;
        if (full < 0) continue;
        const auto& ep = ring.front();
        double send = tab_.context().transfer_s(ep, ep, tab_.context().activation_bytes(b));
        // GPUs of this type usable at this TP: replicas do not span zones (nor nodes).
        int usable = 0;
        for (int z : zset.zones) usable += t * (avail_[g][z] / t);
        int k_cfg = std::min(K[g], usable / D);
        if (k_cfg < t) continue;
        cfgs.push_back({tbl, g, t, full, std::max(0.0, send), k_cfg});
      }
    }
    if (cfgs.empty()) return;

    double usd_cap_per_s = inf;  // on D * pipeline GPU dollars per second
    if (prob_.job.limits.max_cost_per_hour_usd) usd_cap_per_s = *prob_.job.limits.max_cost_per_hour_usd / 3600.0;
    double time_cap = inf;
    if (prob_.job.limits.min_iterations_per_s && *prob_.job.limits.min_iterations_per_s > 0)
      time_cap = 1.0 / *prob_.job.limits.min_iterations_per_s;

    pool_.clear();
    std::vector<std::pair<int, int>> frontier(n_ + 1, {0, 0});
    entry terminal;
    pool_.push_back(terminal);
    frontier[n_] = {0, 1};
    std::vector<entry> cand;
    const double thr0 = threshold();
    const bool allow_rc = prob_.job.allow_recompute;
    const double total_params = std::max(1.0, tab_.stage_params(0, n_));
    const bool need_usd = cost_goal_ || std::isfinite(usd_cap_per_s) ||
                          prob_.job.limits.max_cost_per_iteration_usd.has_value();

    for (int l = n_ - 1; l >= 0; --l) {
      cand.clear();
      const double thr = std::min(thr0, threshold());
      for (int ci = 0; ci < int(cfgs.size()); ++ci) {
        const auto& c = cfgs[ci];
        const auto& tb = *c.table;
        const double cap = tab_.memory_bytes(c.gpu);
        auto& memo = memory_memo(tb);

        for (int e = l + 1; e <= n_; ++e) {
          const double t0 = tb.time(l, e, false);
          const double t1 = tb.time(l, e, true);
          if (!cost_goal_ && 0.97 * m * t0 >= thr && (!allow_rc || 0.97 * m * t1 >= thr)) break;
          if (0.97 * m * t0 > time_cap) break;
          const double m0_one = dp_memory(memo, tb, l, e, false, 1);
          const double m1_one = allow_rc ? dp_memory(memo, tb, l, e, true, 1) : inf;
          if (m0_one > cap && m1_one > cap) break;
          const double per_mb0 = dp_memory(memo, tb, l, e, false, 2) - m0_one;
          const double per_mb1 = allow_rc ? dp_memory(memo, tb, l, e, true, 2) - m1_one : 0;
          const double sync = c.sync_full_s * tab_.stage_params(l, e) / total_params;
          const double tail_c = sync + tb.update(l, e);
          const double link = (e < n_ ? c.send_s : 0.0) + (l > 0 ? c.send_s : 0.0);
          for (int xi = frontier[e].first; xi < frontier[e].second; ++xi) {
            const entry& x = pool_[xi];
            if (x.use[c.gpu] + c.tp > c.budget) continue;
            if (x.stages + 1 > max_stages_) continue;
            const int in_flight = std::min(m, x.stages + 1);
            bool rc = false;
            double t = t0;
            if (m0_one + per_mb0 * (in_flight - 1) > cap) {
              if (!allow_rc || m1_one + per_mb1 * (in_flight - 1) > cap) continue;
              rc = true;
              t = t1;
            }
            // The figures first, the entry (large) only for what survives the pruning.
            const double max_t = std::max(x.max_t, t + link);
            const double sum_t = x.sum_t + t + link;
            const double key = (m - 1) * max_t + sum_t + std::max(x.tail, tail_c);
            // What the rest of the pipeline cannot make smaller: prune on it, with a margin for
            // the simulator's finer accounting (sends, the drain of later stages).
            const double bound = 0.97 * ((m - 1) * max_t + sum_t);
            if (bound > time_cap) continue;
            if (!cost_goal_ && 0.98 * key >= thr) continue;
            double usd_s = 0;
            if (need_usd) {
              for (int g = 0; g < G_; ++g) usd_s += (x.use[g] + (g == c.gpu ? c.tp : 0)) * tab_.usd_per_gpu_s(g);
              usd_s *= D;
              if (usd_s > usd_cap_per_s) continue;
              if (prob_.job.limits.max_cost_per_iteration_usd &&
                  key * usd_s > *prob_.job.limits.max_cost_per_iteration_usd)
                continue;
              if (cost_goal_ && key * usd_s >= thr) continue;
            }
            entry& y = cand.emplace_back(x);
            y.use[c.gpu] += c.tp;
            y.stages = x.stages + 1;
            y.end = e;
            y.cfg = ci;
            y.recompute = rc;
            y.parent = xi;
            y.max_t = max_t;
            y.sum_t = sum_t;
            y.tail = std::max(x.tail, tail_c);
            y.key = key;
            y.rank = cost_goal_ ? key * usd_s : key;
          }
        }
      }
      stats_.dp_states += static_cast<long long>(cand.size());
      // Visited in order of small keys (entries are large), ties in creation order. The beam
      // usually stops long before the end of the candidates, so they are sorted lazily: a prefix
      // at a time (nth_element, then a sort of the prefix), which yields the order a full sort
      // would (the order is total: the creation index breaks every tie).
      order_.clear();
      for (size_t i = 0; i < cand.size(); ++i)
        order_.push_back({cand[i].rank, cand[i].stages, cand[i].cfg, cand[i].end, int(i)});
      auto key_less = [](const sort_key& a, const sort_key& b) {
        if (a.rank != b.rank) return a.rank < b.rank;
        if (a.stages != b.stages) return a.stages < b.stages;
        if (a.cfg != b.cfg) return a.cfg < b.cfg;
        if (a.end != b.end) return a.end < b.end;
        return a.index < b.index;
      };
      size_t sorted_upto = 0;
      auto nth = [&](size_t i) -> const entry& {
        if (i >= sorted_upto) {
          size_t upto = std::min(order_.size(), std::max<size_t>({i + 1, 2 * sorted_upto, 16}));
          auto first = order_.begin() + long(sorted_upto), mid = order_.begin() + long(upto);
          if (mid != order_.end()) std::nth_element(first, mid, order_.end(), key_less);
          std::sort(first, mid, key_less);
          sorted_upto = upto;
        }
        return cand[size_t(order_[i].index)];
      };
      int begin = int(pool_.size());
      int kept = 0;
      auto dominated = [&](const entry& y) {
        for (int k = begin; k < begin + kept; ++k) {
          const entry& z = pool_[k];
          if (z.stages > y.stages || z.max_t > y.max_t || z.sum_t > y.sum_t || z.tail > y.tail) continue;
          // Near ties (within 0.5%) count as ties, and ties are kept: permutations of equal
          // stages place differently on zones, which the program does not see.
          constexpr double tie = 0.98;
          bool le = true, strict = z.stages < y.stages || z.max_t < tie * y.max_t ||
                                   z.sum_t < tie * y.sum_t || z.tail < tie * y.tail;
          for (int g = 0; g < G_ && le; ++g) le = z.use[g] <= y.use[g], strict = strict || z.use[g] < y.use[g];
          if (le && strict) return true;
        }
        return false;
      };
      // First the best partial pipeline of each GPU budget used (so that cheap ones survive
      // when faster, hungrier ones would fill the beam), then the best of the rest.
      taken_.assign(cand.size(), 0);
      seen_.clear();
      for (size_t i = 0; i < cand.size() && kept < opts_.beam_width; ++i) {
        const auto& y = nth(i);
        if (std::find(seen_.begin(), seen_.end(), y.use) != seen_.end()) continue;
        seen_.push_back(y.use);
        taken_[i] = 1;
        if (dominated(y)) continue;
        pool_.push_back(y);
        ++kept;
      }
      const int limit = 2 * opts_.beam_width;
      for (size_t i = 0; i < cand.size() && kept < limit; ++i) {
        if (taken_[i]) continue;
        const auto& y = nth(i);
        if (dominated(y)) continue;
        pool_.push_back(y);
        ++kept;
      }
      frontier[l] = {begin, begin + kept};
    }

    // Complete pipelines: place them and score them.
    double ratio = 1;
    bool ratio_known = false;
    for (int xi = frontier[0].first; xi < frontier[0].second; ++xi) {
      std::vector<stage_shape> shape;
      int a = 0;
      for (int k = xi; k > 0 && pool_[k].cfg >= 0; k = pool_[k].parent) {
        const entry& y = pool_[k];
        const auto& c = cfgs[y.cfg];
        shape.push_back({a, y.end, c.gpu, c.tp, y.recompute});
        a = y.end;
      }
      if (shape.empty() || shape.back().end != n_) continue;
      // The program's estimate is what it pruned by: pipelines the plans found since cannot
      // beat are not placed (placement only adds cross-zone sends and egress).
      // The pipelines of one configuration share their zones, micro-batch and replica count, so
      // the ratio of a placed plan's value to the program's estimate carries over from one to
      // the next: once a placement showed that the estimate was optimistic (pipelines or rings
      // crossing zones), the others are judged by the smallest ratio seen (10% margin). The
      // estimate alone (ratio 1) is no bound: it counts the slowest stage's sync in full.
      const double rank = pool_[xi].rank;
      if (0.9 * rank * ratio < threshold()) {
        double v = consider(shape, zs, b, D);
        if (std::isfinite(v) && rank > 0) {
          const double r = std::max(1.0, v / rank);
          ratio = ratio_known ? std::min(ratio, r) : r;
          ratio_known = true;
        }
      }
      // Only the most promising pipelines are tried with more replicas than the budget allows.
      if (opts_.mixed_replicas && xi < frontier[0].first + 2) augment(shape, zs, b, D);
    }
  }

  // --- placement -------------------------------------------------------------------------------
  // Replicas of each stage on zones. `pipeline_major`: whole pipelines in one zone where they
  // fit (transfers stay inside zones, rings cross them); otherwise stage by stage, filling the
  // zones in order (rings stay inside zones, pipelines cross them). When a stage's GPU type has
  // run out and `mixed` is set, a replica of another type that is no slower on the stage's
  // layers and fits memory takes its place.
  std::optional<config::plan> place(const std::vector<stage_shape>& shape, int zs, int b, int D,
                                    bool pipeline_major, bool mixed, bool widest_first = false) const {
    const zone_set& zset = zone_sets_[zs];
    // GPUs left per (type, zone), flat; buffers reused from call to call.
    const size_t Zn = zone_names_.size();
    auto& left = place_left_;
    left.assign(size_t(G_) * Zn, 0);
    for (int g = 0; g < G_; ++g)
      for (int z : zset.zones) left[size_t(g) * Zn + size_t(z)] = avail_[g][z];
    const int S = int(shape.size());
    const int m = micro_batches(b, D);
    double bottleneck = 0;
    for (const auto& s : shape)
      bottleneck = std::max(bottleneck, tab_.find(s.gpu, s.tp, b)->time(s.first, s.end, s.recompute));
    // Replicas as indices (type, zone, TP) while placing; names only for a plan that is made.
    auto& reps = place_reps_;
    if (reps.size() < size_t(S)) reps.resize(size_t(S));
    for (int s = 0; s < S; ++s) {
      reps[s].clear();
      reps[s].reserve(size_t(D));
    }

    // The (type, TP) that may stand in for a stage's replicas depend on the stage alone (speed
    // and memory), not on what is left: found once per stage, in the order they are tried.
    struct stand_in { double score; int g, tp; };
    std::vector<std::vector<stand_in>> stand_ins;
    std::vector<char> stand_ins_known;
    auto substitute = [&](int s, int prefer_zone) -> bool {
      const auto& st = shape[s];
      if (stand_ins.empty()) {
        stand_ins.resize(size_t(S));
        stand_ins_known.assign(size_t(S), 0);
      }
      auto& opts = stand_ins[size_t(s)];
      if (!stand_ins_known[size_t(s)]) {
        stand_ins_known[size_t(s)] = 1;
        int in_flight = std::min(m, S - s);
        for (int g = 0; g < G_; ++g) {
          for (int t : tab_.tps(g, b)) {
            const auto* tb = tab_.find(g, t, b);
            double tt = tb->time(st.first, st.end, st.recompute);
            if (tt > bottleneck * (1 + 1e-9)) continue;
            if (tab_.stage_memory(*tb, st.first, st.end, st.recompute, in_flight) > tab_.memory_bytes(g))
              continue;
            // Cheapest in GPU-dollars per micro-batch first.
            opts.push_back({t * tab_.usd_per_gpu_s(g) * tt, g, t});
          }
        }
      }
      struct opt { double t; int g, tp, z; };
      std::optional<opt> best;
      for (const auto& o : opts) {
        const int g = o.g, t = o.tp;
        int zpick = -1;
        if (prefer_zone >= 0 && left[size_t(g) * Zn + size_t(prefer_zone)] >= t) zpick = prefer_zone;
        for (int z : zset.zones)
          if (zpick < 0 && left[size_t(g) * Zn + size_t(z)] >= t) zpick = z;
        if (zpick < 0) continue;
        if (!best || o.score < best->t) best = opt{o.score, g, t, zpick};
      }
      if (!best) return false;
      left[size_t(best->g) * Zn + size_t(best->z)] -= best->tp;
      reps[s].push_back({best->g, best->z, best->tp});
      return true;
    };

    if (pipeline_major) {
      std::vector<int> need(G_, 0);
      for (const auto& s : shape) need[s.gpu] += s.tp;
      for (int i = 0; i < D; ++i) {
        int home = -1;
        for (int z : zset.zones) {
          bool ok = true;
          for (int g = 0; g < G_ && ok; ++g) ok = left[size_t(g) * Zn + size_t(z)] >= need[g];
          if (ok) { home = z; break; }
        }
        int prev = home;
        for (int s = 0; s < S; ++s) {
          const auto& st = shape[s];
          int z = -1;
          if (prev >= 0 && left[size_t(st.gpu) * Zn + size_t(prev)] >= st.tp) z = prev;
          if (z < 0) {
            int most = 0;
            for (int zz : zset.zones)
              if (left[size_t(st.gpu) * Zn + size_t(zz)] >= st.tp && left[size_t(st.gpu) * Zn + size_t(zz)] > most) most = left[size_t(st.gpu) * Zn + size_t(zz)], z = zz;
          }
          if (z < 0) {
            if (!mixed || !substitute(s, prev)) return std::nullopt;
            continue;
          }
          left[size_t(st.gpu) * Zn + size_t(z)] -= st.tp;
          reps[s].push_back({st.gpu, z, st.tp});
          prev = z;
        }
      }
    } else {
      // Stages needing the most GPUs per replica first: they are the hardest to fit in a zone.
      std::vector<int> order(S);
      for (int s = 0; s < S; ++s) order[s] = s;
      if (widest_first)
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return shape[x].tp > shape[y].tp; });
      for (int s : order) {
        const auto& st = shape[s];
        for (int i = 0; i < D; ++i) {
          int z = -1;
          for (int zz : zset.zones)
            if (left[size_t(st.gpu) * Zn + size_t(zz)] >= st.tp) { z = zz; break; }
          if (z < 0) {
            if (!mixed || !substitute(s, -1)) return std::nullopt;
            continue;
          }
          left[size_t(st.gpu) * Zn + size_t(z)] -= st.tp;
          reps[s].push_back({st.gpu, z, st.tp});
        }
        // Replicas in zone order (only substitutes can be out of it).
        std::vector<int> rank(reps[s].size());
        for (size_t i = 0; i < rank.size(); ++i) rank[i] = zone_rank(zs, reps[s][i].z);
        if (!std::is_sorted(rank.begin(), rank.end())) {
          std::vector<size_t> idx(rank.size());
          for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
          std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return rank[x] < rank[y]; });
          std::vector<slot> sorted;
          sorted.reserve(idx.size());
          for (size_t i : idx) sorted.push_back(reps[s][i]);
          reps[s] = std::move(sorted);
        }
      }
    }
    config::plan p;
    p.micro_batch = b;
    p.global_batch = gbs_;
    for (int s = 0; s < S; ++s) {
      config::stage_plan sp;
      sp.first_layer = shape[s].first;
      sp.num_layers = shape[s].end - shape[s].first;
      sp.recompute = shape[s].recompute;
      sp.replicas.reserve(reps[s].size());
      for (const auto& r : reps[s]) sp.replicas.push_back({tab_.gpu_names()[r.g], zone_names_[r.z], r.tp, {}, {}});
      p.stages.push_back(std::move(sp));
    }
    return p;
  }

  // A zone's position in the zone set's placement order (its size when not in the set).
  int zone_rank(int zs, int z) const {
    const auto& zones = zone_sets_[zs].zones;
    for (size_t i = 0; i < zones.size(); ++i)
      if (zones[i] == z) return int(i);
    return int(zones.size());
  }

  // Places the pipeline in the ways worth trying and offers the plans; returns the best
  // feasible objective value among them (inf if none).
  double consider(const std::vector<stage_shape>& shape, int zs, int b, int D) {
    double best = inf;
    bool single_zone = zone_sets_[zs].zones.size() == 1;
    // Pipeline-major, then stage-major in stage order and in order of GPUs per replica.
    for (int pm = 0; pm < 3; ++pm) {
      if (single_zone && pm > 0 && place_ok_) continue;
      auto p = place(shape, zs, b, D, pm == 0, false, pm == 2);
      place_ok_ = p.has_value();
      if (!p && opts_.mixed_replicas) p = place(shape, zs, b, D, pm == 0, true, pm == 2);
      if (p) best = std::min(best, offer(std::move(*p)));
    }
    return best;
  }

  // More pipelines than the per-type budget allows, with replicas of other types standing in
  // where a type runs out: uses the GPUs that the uniform budget leaves idle.
  void augment(const std::vector<stage_shape>& shape, int zs, int b, int D) {
    const int dmax = std::min(std::max(1, gbs_ / b), simulator::resolved_plan::max_replicas);
    bool single_zone = zone_sets_[zs].zones.size() == 1;
    for (int pm = 0; pm < (single_zone ? 1 : 2); ++pm) {
      int failures = 0;
      for (int D2 = D + 1; D2 <= dmax && failures < 2; ++D2) {
        if (micro_batches(b, D2) == micro_batches(b, D2 - 1) && D2 < dmax) continue;
        auto p = place(shape, zs, b, D2, pm == 0, true, pm == 1);
        if (!p) { ++failures; continue; }
        offer(std::move(*p));
      }
    }
  }

  double offer(config::plan p) {
    ++stats_.plans_scored;
    auto c = make_candidate(prob_, tab_, net_, std::move(p), false);
    if (!c) return inf;
    double v = c->feasible ? c->value : inf;
    offer(std::move(*c));
    return v;
  }

  void offer(candidate cand) {
    std::optional<candidate> c(std::move(cand));
    // Keep the list sorted, without duplicates, at most keep_ long. Cheap rejections first
    // (before the canonical text, which only breaks exact ties).
    if (int(best_.size()) >= keep_) {
      const auto& w = best_.back();
      if (c->feasible != w.feasible) {
        if (!c->feasible) return;
      } else if (c->value != w.value) {
        if (c->value > w.value) return;
      } else if (c->plan.total_gpus() > w.plan.total_gpus()) {
        return;
      }
    }
    if (c->key.empty()) c->key = canonical(c->plan);
    if (int(best_.size()) >= keep_ && !better(*c, best_.back())) return;
    for (const auto& b : best_)
      if (b.value == c->value && b.key == c->key) return;
    auto it = std::upper_bound(best_.begin(), best_.end(), *c, better);
    best_.insert(it, std::move(*c));
    if (int(best_.size()) > keep_) best_.pop_back();
  }

  // --- local search on complete plans --------------------------------------------------------
  // The program ranks partial pipelines without knowing where placement will put them (zones,
  // cross-zone sends and egress), so its best plans can be a move or two from better ones.
  // Hill climbing from the best few candidates, scored by the closed form (the same scorer as
  // everything else), over moves that keep a plan's shape simple: shift a stage boundary by a
  // layer, change a stage's TP, GPU type or zone, move one replica to another zone, merge two
  // neighbour stages, split a stage. Each climb stops at a local optimum or when the budget of
  // evaluations is spent; results only ever replace worse ones.
  int zone_index(const std::string& z) const {
    for (size_t i = 0; i < zone_names_.size(); ++i)
      if (zone_names_[i] == z) return int(i);
    return -1;
  }

  bool within_availability(const config::plan& p) const {
    std::vector<std::vector<int>> used(G_, std::vector<int>(zone_names_.size(), 0));
    const config::replica* prev = nullptr;
    int g = -1, z = -1;
    for (const auto& s : p.stages)
      for (const auto& r : s.replicas) {
        // Names looked up again only when they change from the previous replica's.
        if (!prev || r.gpu_type != prev->gpu_type) g = tab_.gpu_index(r.gpu_type);
        if (!prev || r.zone != prev->zone) z = zone_index(r.zone);
        prev = &r;
        if (g < 0 || g >= G_ || z < 0) return false;
        used[g][z] += r.tp;
        if (used[g][z] > avail_[g][z]) return false;
      }
    return true;
  }

  // Recomputation exactly where a stage would not fit without it; false when some replica's
  // (type, TP) has no table at this micro-batch.
  bool normalize(config::plan& p) const {
    const int S = p.num_stages();
    for (int s = 0; s < S; ++s) {
      auto& st = p.stages[s];
      if (st.num_layers <= 0 || st.replicas.empty()) return false;
      const int m = micro_batches(p.micro_batch, int(st.replicas.size()));
      const int in_flight = std::min(m, S - s);
      bool fits0 = true, fits1 = true;
      const config::replica* prev = nullptr;
      for (const auto& r : st.replicas) {
        // Replicas of the kind just checked fit as it does.
        if (prev && r.tp == prev->tp && r.gpu_type == prev->gpu_type) continue;
        prev = &r;
        int g = tab_.gpu_index(r.gpu_type);
        if (g < 0) return false;
        const auto* tb = tab_.find(g, r.tp, p.micro_batch);
        if (!tb || r.tp > tab_.gpus_per_node(g)) return false;
        const double cap = tab_.memory_bytes(g);
        fits0 = fits0 && tab_.stage_memory(*tb, st.first_layer, st.end_layer(), false, in_flight) <= cap;
        fits1 = fits1 && tab_.stage_memory(*tb, st.first_layer, st.end_layer(), true, in_flight) <= cap;
      }
      st.recompute = !fits0 && fits1 && prob_.job.allow_recompute;
    }
    return true;
  }

  // Every neighbour of `p`, given to `visit` (unchecked: it normalizes and checks availability)
  // until it returns false.
  template <class Visit>
  void neighbours(const config::plan& p, Visit&& visit) const {
    struct stop {};
    struct sink {
      Visit& v;
      void push_back(config::plan&& q) {
        if (!v(std::move(q))) throw stop{};
      }
    } out{visit};
    try {
      neighbours_into(p, out);
    } catch (const stop&) {
    }
  }

  // Zones a local move may go to: every zone of a small pool; in a large one, the zones of the
  // regions the plan already uses and the two largest zones (a move to a far, small zone is
  // what the zone sets already judged).
  std::vector<int> move_zones(const config::plan& p) const {
    const int Z = int(zone_names_.size());
    std::vector<int> out;
    if (Z <= 16) {
      for (int z = 0; z < Z; ++z) out.push_back(z);
      return out;
    }
    std::set<std::string> regions;
    for (const auto& st : p.stages)
      for (const auto& r : st.replicas)
        if (const auto* zone = prob_.cluster.find_zone(r.zone)) regions.insert(zone->region);
    std::vector<int> by_size;
    for (int z = 0; z < Z; ++z) {
      if (regions.count(region_of(z))) out.push_back(z);
      else by_size.push_back(z);
    }
    std::partial_sort(by_size.begin(), by_size.begin() + std::min<size_t>(2, by_size.size()), by_size.end(),
                      [&](int a, int b) { return zone_capacity(a) > zone_capacity(b); });
    for (size_t i = 0; i < by_size.size() && i < 2; ++i) out.push_back(by_size[i]);
    return out;
  }

  template <class Out>
  void neighbours_into(const config::plan& p, Out& out) const {
    const int S = p.num_stages();
    const int b = p.micro_batch;
    const std::vector<int> zones = move_zones(p);
    auto with_kind = [&](std::vector<config::replica> reps, int g, int t, int zone) {
      for (auto& r : reps) {
        r.gpu_type = tab_.gpu_names()[g];
        r.tp = t;
        if (zone >= 0) r.zone = zone_names_[zone];
      }
      return reps;
    };
    for (int s = 0; s < S; ++s) {
      const auto& st = p.stages[s];
      // Boundary with the next stage, one layer either way.
      if (s + 1 < S) {
        for (int d : {-1, 1}) {
          config::plan q = p;
          q.stages[s].num_layers += d;
          q.stages[s + 1].first_layer += d;
          q.stages[s + 1].num_layers -= d;
          if (q.stages[s].num_layers > 0 && q.stages[s + 1].num_layers > 0) out.push_back(std::move(q));
        }
      }
      // The stage's GPU type and TP (zones kept), or all its replicas in one zone.
      for (int g = 0; g < G_; ++g)
        for (int t : tab_.tps(g, b)) {
          if (tab_.gpu_names()[g] == st.replicas[0].gpu_type && t == st.replicas[0].tp) continue;
          config::plan q = p;
          q.stages[s].replicas = with_kind(st.replicas, g, t, -1);
          out.push_back(std::move(q));
        }
      for (int z : zones) {
        config::plan q = p;
        for (auto& r : q.stages[s].replicas) r.zone = zone_names_[z];
        out.push_back(std::move(q));
        for (size_t r = 0; r < st.replicas.size(); ++r) {
          if (st.replicas[r].zone == zone_names_[z]) continue;
          if (r > 0 && st.replicas[r].zone == st.replicas[r - 1].zone &&
              st.replicas[r].gpu_type == st.replicas[r - 1].gpu_type && st.replicas[r].tp == st.replicas[r - 1].tp)
            continue;  // the same move as for the previous replica
          config::plan q2 = p;
          q2.stages[s].replicas[r].zone = zone_names_[z];
          out.push_back(std::move(q2));
        }
      }
      // One replica more (of the stage's last replica's kind, in any zone) or one fewer (the
      // last one of a zone): data-parallel degrees that differ by stage.
      if (opts_.per_stage_replicas) {
        if (int(st.replicas.size()) < simulator::resolved_plan::max_replicas &&
            int(st.replicas.size()) < gbs_ / std::max(1, b))
          for (int z : zones) {
            config::plan q = p;
            auto r = st.replicas.back();
            r.zone = zone_names_[z];
            r.nodes.clear();
            r.devices.clear();
            q.stages[s].replicas.push_back(std::move(r));
            out.push_back(std::move(q));
          }
        if (st.replicas.size() > 1)
          for (size_t r = 0; r < st.replicas.size(); ++r) {
            if (r + 1 < st.replicas.size() && st.replicas[r + 1].zone == st.replicas[r].zone) continue;
            config::plan q = p;
            q.stages[s].replicas.erase(q.stages[s].replicas.begin() + long(r));
            out.push_back(std::move(q));
          }
      }
      // Merge with the next stage: the replicas of either, at any TP of their type.
      if (s + 1 < S) {
        for (int side = 0; side < 2; ++side) {
          const auto& src = p.stages[s + side].replicas;
          int g = tab_.gpu_index(src[0].gpu_type);
          if (g < 0) continue;
          for (int t : tab_.tps(g, b)) {
            config::plan q = p;
            q.stages[s].num_layers += q.stages[s + 1].num_layers;
            q.stages[s].replicas = with_kind(src, g, t, -1);
            q.stages.erase(q.stages.begin() + s + 1);
            out.push_back(std::move(q));
          }
        }
      }
      // Split: the first part keeps the replicas at any TP of their type, the second gets as
      // many replicas of any (type, TP), in the same zones or all in one zone.
      for (int k = st.first_layer + 1; k < st.end_layer() && S < max_stages_; ++k) {
        int g0 = tab_.gpu_index(st.replicas[0].gpu_type);
        if (g0 < 0) break;
        for (int t0 : tab_.tps(g0, b))
          for (int g = 0; g < G_; ++g)
            for (int t : tab_.tps(g, b))
              for (int zi = -1; zi < int(zones.size()); ++zi) {
                const int z = zi < 0 ? -1 : zones[size_t(zi)];
                config::plan q = p;
                auto& a = q.stages[s];
                config::stage_plan c = a;
                a.num_layers = k - a.first_layer;
                a.replicas = with_kind(st.replicas, g0, t0, -1);
                c.first_layer = k;
                c.num_layers = st.end_layer() - k;
                c.replicas = with_kind(st.replicas, g, t, z);
                q.stages.insert(q.stages.begin() + s + 1, std::move(c));
                out.push_back(std::move(q));
              }
      }
    }
  }

  void polish() {
    if (best_.empty() || opts_.polish_work <= 0) return;
    // Work is counted in replicas: evaluating a plan costs its replica count, generating a move
    // (copying the plan) a quarter of it; so big plans get fewer moves than small ones.
    long long budget = opts_.polish_work;
    std::vector<candidate> starts(best_.begin(), best_.end());
    std::set<std::string> seen;
    for (auto cur : starts) {
      seen.insert(cur.key);
      while (budget > 0) {
        long long reps = 0;
        for (const auto& st : cur.plan.stages) reps += (long long)st.replicas.size();
        std::optional<candidate> step;
        neighbours(cur.plan, [&](config::plan&& q) {
          if (budget <= 0) return false;
          budget -= 1 + reps / 4;
          if (!normalize(q) || !within_availability(q)) return true;
          q.estimate.reset();
          budget -= reps;
          ++stats_.plans_scored;
          auto c = make_candidate(prob_, tab_, net_, std::move(q));
          if (c && better(*c, step ? *step : cur)) step = std::move(c);
          return true;
        });
        if (!step || !seen.insert(step->key).second) break;
        cur = *step;
        offer(std::move(*step));
      }
    }
  }

  const problem& prob_;
  const tables& tab_;
  const network& net_;
  const options& opts_;
  int keep_;
  double slack_;
  search_stats& stats_;
  int G_ = 0, n_ = 0, gbs_ = 0, max_stages_ = 0;
  bool cost_goal_ = false;
  std::vector<std::string> zone_names_;
  std::vector<std::vector<int>> avail_;  // [type][zone]
  std::vector<zone_set> zone_sets_;
  std::vector<entry> pool_;
  struct sort_key {
    double rank;
    int stages, cfg, end, index;
  };
  std::vector<sort_key> order_;
  // Placement's scratch (place() is logically const): replicas as indices (type, zone, TP)
  // while placing, names only in the plan it returns.
  struct slot { int g, z, tp; };
  mutable std::vector<int> place_left_;
  mutable std::vector<std::vector<slot>> place_reps_;
  std::unordered_map<const config_table*, std::vector<double>> memory_memo_;
  std::vector<char> taken_;
  std::vector<std::array<std::int16_t, max_types>> seen_;
  std::vector<candidate> best_;
  bool place_ok_ = false;
};

}  // namespace

bool better(const candidate& a, const candidate& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.value != b.value) return a.value < b.value;
  int ga = a.plan.total_gpus(), gb = b.plan.total_gpus();
  if (ga != gb) return ga < gb;
  return a.key < b.key;
}

std::optional<candidate> make_candidate(const problem& prob, const tables& tab, const network& net,
                                        config::plan p, bool with_key) {
  (void)net;
  auto rp = simulator::resolve(tab.context(), p);
  if (!rp) return std::nullopt;
  auto q = simulator::closed_form(tab.context(), *rp);
  candidate c;
  auto& e = c.detail.totals;
  e.iteration_time_s = q.iteration_time_s;
  e.throughput_iters_per_s = q.iteration_time_s > 0 ? 1.0 / q.iteration_time_s : 0;
  e.cost_per_iteration_usd = q.cost_per_iteration_usd;
  e.cost_per_hour_usd = q.iteration_time_s > 0 ? q.cost_per_iteration_usd * 3600.0 / q.iteration_time_s : 0;
  e.peak_memory_bytes = q.peak_memory_bytes;
  c.detail.pipeline_s = q.pipeline_s;
  c.detail.egress_usd_per_iteration = q.egress_usd_per_iteration;
  c.detail.fits_memory = q.worst_memory_headroom_bytes >= 0;
  p.estimate = e;
  c.plan = std::move(p);
  c.value = objective_value(prob.job, e);
  c.feasible = c.detail.fits_memory && meets_constraints(prob.job, e);
  if (with_key) c.key = canonical(c.plan);
  return c;
}

std::vector<candidate> search(const problem& prob, const tables& tab, const network& net,
                              const options& opts, int keep, double slack, search_stats& stats) {
  searcher s(prob, tab, net, opts, keep, slack, stats);
  return s.run();
}

}  // namespace sailor::planner::detail
