#include "sailor/planner/planner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <sstream>
#include <tuple>

#include "search.hpp"

namespace sailor::planner {

namespace {

using clock_type = std::chrono::steady_clock;

std::string fmt(double v, int digits = 4) {
  std::ostringstream o;
  o.precision(digits);
  o << v;
  return o.str();
}

status check_problem(const problem& prob, const detail::tables& tab) {
  if (prob.job.global_batch <= 0)
    return error::invalid_input("job.global_batch", "must be a positive number of sequences");
  if (prob.model.num_layers <= 0)
    return error::invalid_input("model.num_layers", "the model has no layers");
  if (prob.cluster.total_gpus() == 0)
    return error::infeasible("cluster.zones", "no GPUs are available");
  if (tab.gpu_names().empty()) {
    std::string types;
    for (const auto& [g, zones] : availability_of(prob.cluster)) types += (types.empty() ? "" : ", ") + g;
    std::string profiled;
    for (const auto& [g, p] : prob.profile.by_gpu) profiled += (profiled.empty() ? "" : ", ") + g;
    return error::not_found("", "profile",
                            "no available GPU type (" + types + ") has a profile for model '" +
                                prob.model.name + "' (profiled: " + profiled + ")");
  }
  return std::nullopt;
}

// Why nothing fits: the smallest memory any single layer needs, against the largest GPU.
sailor::error explain_memory(const problem& prob, const detail::tables& tab) {
  double best_ratio = INFINITY;
  std::string where;
  for (int g = 0; g < int(tab.gpu_names().size()); ++g) {
    for (int b : tab.micro_batches()) {
      for (int t : tab.tps(g, b)) {
        const auto* c = tab.find(g, t, b);
        for (int l = 0; l < tab.num_layers(); ++l) {
          double need = tab.stage_memory(*c, l, l + 1, prob.job.allow_recompute, 1);
          double ratio = need / std::max(1.0, tab.memory_bytes(g));
          if (ratio > 1 && ratio < best_ratio) {
            best_ratio = ratio;
            // Name the check that binds: ours, or Sailor's formula (the larger of the two).
            double ours = tab.stage_memory_ours(*c, l, l + 1, prob.job.allow_recompute, 1);
            std::string check = need > ours ? " by Sailor's memory formula (" + fmt(ours / 1e9) +
                                                " GB by ours)"
                                            : " by our memory model";
            where = "layer " + std::to_string(l) + " alone needs " + fmt(need / 1e9) + " GB" +
                    check + " on " + tab.gpu_names()[g] + " (TP " + std::to_string(t) +
                    ", micro-batch " + std::to_string(b) + "), which has " +
                    fmt(tab.memory_bytes(g) / 1e9) + " GB";
          }
        }
      }
    }
  }
  std::string msg = "the model fits on none of the available GPUs";
  if (!where.empty()) {
    msg += ": " + where + " (over by " + fmt((best_ratio - 1) * 100, 3) + "%)";
    return error::infeasible("cluster", msg);
  }
  // Every layer fits somewhere alone: the pool is too small for the whole model. Compare the
  // model's footprint (all layers, one micro-batch in flight, GPU memory summed over a replica)
  // with all the memory the pool has.
  double need = INFINITY, pool = 0;
  std::string how;
  for (int g = 0; g < int(tab.gpu_names().size()); ++g) {
    for (const auto& z : prob.cluster.zones)
      if (auto it = z.gpus.find(tab.gpu_names()[g]); it != z.gpus.end()) pool += it->second * tab.memory_bytes(g);
    for (int b : tab.micro_batches())
      for (int t : tab.tps(g, b)) {
        const auto& c = *tab.find(g, t, b);
        const int n = tab.num_layers();
        double m = t * tab.stage_memory(c, 0, n, prob.job.allow_recompute, 1);
        if (m < need) {
          need = m;
          double ours = t * tab.stage_memory_ours(c, 0, n, prob.job.allow_recompute, 1);
          how = tab.gpu_names()[g] + " at TP " + std::to_string(t) +
                (m > ours ? ", by Sailor's memory formula; " + fmt(ours / 1e9) + " GB by ours"
                          : ", by our memory model");
        }
      }
  }
  msg += ": the whole model needs about " + fmt(need / 1e9) + " GB of GPU memory (" + how +
         ", one micro-batch in flight), the pool has " + fmt(pool / 1e9) + " GB in " +
         std::to_string(prob.cluster.total_gpus()) + " GPUs";
  if (need > pool) msg += " (short by " + fmt((need / std::max(pool, 1.0) - 1) * 100, 3) + "%)";
  else msg += " (too few GPUs of a kind, or per zone, for the stages the model needs)";
  return error::infeasible("cluster", msg);
}

// Which constraint cannot be met, and by how much: the best value reachable without it.
sailor::error explain_constraints(const problem& prob, const detail::tables& tab,
                                  const detail::network& net, const options& opts) {
  const auto& lim = prob.job.limits;
  detail::search_stats stats;
  auto best_under = [&](config::objective goal) -> std::optional<detail::candidate> {
    problem free = prob;
    free.job.limits = {};
    free.job.goal = goal;
    auto c = detail::search(free, tab, net, opts, 1, 0.0, stats);
    if (c.empty() || !c.front().feasible) return std::nullopt;
    return c.front();
  };
  if (lim.min_iterations_per_s) {
    auto fastest = best_under(config::objective::max_throughput);
    if (!fastest) return explain_memory(prob, tab);
    double got = fastest->detail.summary().throughput_iters_per_s;
    if (got < *lim.min_iterations_per_s)
      return error::infeasible("job.constraints.min_iterations_per_s",
                               "cannot be met: " + fmt(*lim.min_iterations_per_s) +
                                   " iterations/s asked, the fastest plan reaches " + fmt(got) +
                                   " (short by " + fmt((1 - got / *lim.min_iterations_per_s) * 100, 3) + "%)");
  }
  auto cheapest = best_under(config::objective::min_cost);
  if (!cheapest) return explain_memory(prob, tab);
  if (lim.max_cost_per_iteration_usd &&
      cheapest->detail.summary().cost_per_iteration_usd > *lim.max_cost_per_iteration_usd) {
    double got = cheapest->detail.summary().cost_per_iteration_usd;
    return error::infeasible("job.constraints.max_cost_per_iteration_usd",
                             "cannot be met: at most $" + fmt(*lim.max_cost_per_iteration_usd) +
                                 " per iteration asked, the cheapest plan costs $" + fmt(got) +
                                 " (over by " + fmt((got / *lim.max_cost_per_iteration_usd - 1) * 100, 3) + "%)");
  }
  if (lim.max_cost_per_hour_usd) {
    double got = cheapest->detail.summary().cost_per_hour_usd;
    return error::infeasible("job.constraints.max_cost_per_hour_usd",
                             "cannot be met: at most $" + fmt(*lim.max_cost_per_hour_usd) +
                                 " per hour asked, the cheapest plan per iteration runs at $" + fmt(got) +
                                 " per hour" +
                                 (got > *lim.max_cost_per_hour_usd
                                      ? " (over by " + fmt((got / *lim.max_cost_per_hour_usd - 1) * 100, 3) + "%)"
                                      : "; no plan found meets this together with the other constraints"));
  }
  return error::infeasible("job.constraints",
                           "the constraints cannot be met together (each alone can)");
}

// The event-driven estimate of a plan: iteration time from the simulated 1F1B schedule, GPU
// dollars for that time plus the closed form's egress (bytes do not depend on the schedule).
result<config::plan_estimate> event_estimate(const simulator::sim_context& ctx, const config::plan& p) {
  auto ev = simulator::simulate_events(ctx, p);
  if (!ev) return ev.error();
  auto rp = simulator::resolve(ctx, p);
  if (!rp) return rp.error();
  auto q = simulator::closed_form(ctx, *rp);
  config::plan_estimate e;
  e.iteration_time_s = ev->iteration_time_s;
  e.throughput_iters_per_s = e.iteration_time_s > 0 ? 1.0 / e.iteration_time_s : 0;
  e.cost_per_iteration_usd = q.gpu_usd_per_hour * e.iteration_time_s / 3600.0 + q.egress_usd_per_iteration;
  e.cost_per_hour_usd = e.iteration_time_s > 0 ? e.cost_per_iteration_usd * 3600.0 / e.iteration_time_s : 0;
  e.peak_memory_bytes = q.peak_memory_bytes;
  return e;
}

// The scorer the options ask for: theirs, else the event simulation when asked, else none.
scorer effective_scorer(const options& opts, const simulator::sim_context& ctx) {
  if (opts.score) return opts.score;
  if (opts.rerank_with_events) return [&ctx](const config::plan& p) { return event_estimate(ctx, p); };
  return {};
}

// Re-ranks the feasible candidates with the scorer (their closed-form value without one) and
// returns the index chosen: among those within `tolerance` of the best, the most robust
// (robustness_of): inside regions first, then the least rounding waste, then the value.
size_t rerank(const problem& prob, std::vector<detail::candidate>& cands, const scorer& score,
              size_t limit, double tolerance) {
  std::vector<double> value(cands.size(), INFINITY);
  double best_value = INFINITY;
  size_t best = 0;
  for (size_t i = 0; i < cands.size() && i < limit; ++i) {
    if (!cands[i].feasible) continue;
    double v = cands[i].value;
    if (score) {
      auto e = score(cands[i].plan);
      if (!e) continue;
      if (!meets_constraints(prob.job, *e)) continue;
      v = objective_value(prob.job, *e);
      cands[i].plan.estimate = *e;
    }
    value[i] = v;
    if (v < best_value * (1 - 1e-12)) best_value = v, best = i;
  }
  if (!(tolerance > 0) || !std::isfinite(best_value)) return best;
  struct key {
    bool crosses_regions;
    double adjusted;  // the value as if the rounding waste were lost once more
    size_t index;
    bool operator<(const key& o) const {
      return std::tie(crosses_regions, adjusted, index) < std::tie(o.crosses_regions, o.adjusted, o.index);
    }
  };
  std::optional<key> pick;
  for (size_t i = 0; i < cands.size() && i < limit; ++i) {
    if (!(value[i] <= best_value * (1 + tolerance))) continue;
    const robustness r = robustness_of(prob.cluster, prob.model, cands[i].plan);
    const key k{r.cross_region_bytes > 0, value[i] * (1 + r.rounding_waste), i};
    if (!pick || k < *pick) pick = k;
  }
  return pick ? pick->index : best;
}

}  // namespace

robustness robustness_of(const config::cluster& cluster, const config::model_shape& model, const config::plan& p) {
  robustness r;
  auto region = [&](const std::string& zone) -> const std::string& {
    const auto* z = cluster.find_zone(zone);
    return z ? z->region : zone;
  };
  const double act = double(model.sequence) * model.hidden * config::bytes_of(model.precision) * p.micro_batch;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    const int R = std::max<int>(1, int(st.replicas.size()));
    const int per_replica = (p.global_batch + R - 1) / R;
    const int m = std::max(1, (per_replica + p.micro_batch - 1) / p.micro_batch);
    if (p.global_batch > 0)
      r.rounding_waste = std::max(r.rounding_waste, double(m) * R * p.micro_batch / p.global_batch - 1.0);
    // A ring over replicas in several regions crosses region links at least twice.
    bool spread = false;
    for (const auto& rep : st.replicas) spread = spread || region(rep.zone) != region(st.replicas[0].zone);
    if (spread) {
      double params = 0;
      for (int l = st.first_layer; l < st.end_layer(); ++l) params += double(model.params_of_layer(l));
      // Under DiLoCo the regions exchange every inner_steps iterations (fp32 or less).
      const double every = p.local_sgd ? double(std::max(1, p.local_sgd->inner_steps)) : 1.0;
      r.cross_region_bytes += 2.0 * 2.0 * (R - 1) / R * params * 4.0 / every;
    }
    if (s + 1 < p.stages.size()) {
      const auto& next = p.stages[s + 1];
      const size_t n = std::max(st.replicas.size(), next.replicas.size());
      for (size_t i = 0; i < n && !st.replicas.empty() && !next.replicas.empty(); ++i)
        if (region(st.replicas[i % st.replicas.size()].zone) != region(next.replicas[i % next.replicas.size()].zone))
          r.cross_region_bytes += 2.0 * act * m;
    }
  }
  return r;
}

double state_kept(const problem& prob, const config::plan& before, const config::plan& after) {
  // Parameters of (layer, zone, GPU type) the old plan held: moving them inside a zone is cheap,
  // bringing them into a zone is what costs.
  auto held = [&](const config::plan& p, int layer, const config::replica& r) {
    for (const auto& s : p.stages) {
      if (layer < s.first_layer || layer >= s.end_layer()) continue;
      for (const auto& o : s.replicas)
        if (o.zone == r.zone && o.gpu_type == r.gpu_type) return true;
    }
    return false;
  };
  double kept = 0, total = 0;
  for (const auto& s : after.stages) {
    for (int l = s.first_layer; l < s.end_layer(); ++l) {
      double w = double(std::max<std::int64_t>(1, prob.model.params_of_layer(l)));
      for (const auto& r : s.replicas) {
        total += w;
        if (held(before, l, r)) kept += w;
      }
    }
  }
  return total > 0 ? kept / total : 0;
}

namespace {

// Makes the simulator's context of `prob` and the tables and network the search reads, checks
// the problem against them, and runs `search` on them; the result records how long it all took.
template <class Search>
result<plan_result> timed_search(const problem& prob, Search&& search) {
  const auto t0 = clock_type::now();
  auto ctx = make_context(prob);
  if (!ctx) return ctx.error();
  detail::tables tab(prob, *ctx);
  if (auto err = check_problem(prob, tab)) return *err;
  detail::network net(*ctx);
  result<plan_result> out = search(*ctx, tab, net);
  if (out) out->search_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return out;
}

}  // namespace

result<plan_result> plan_job(const problem& prob, const options& opts) {
  return timed_search(prob, [&](const simulator::sim_context& ctx, const detail::tables& tab,
                                 const detail::network& net) -> result<plan_result> {
    detail::search_stats stats;
    int keep = std::max(1, opts.candidates_to_rerank);
    auto cands = detail::search(prob, tab, net, opts, keep, 0.0, stats);
    if (cands.empty() || !cands.front().feasible) {
      if (cands.empty() && !prob.job.limits.max_cost_per_hour_usd &&
          !prob.job.limits.max_cost_per_iteration_usd && !prob.job.limits.min_iterations_per_s)
        return explain_memory(prob, tab);
      return explain_constraints(prob, tab, net, opts);
    }
    const scorer score = effective_scorer(opts, ctx);
    size_t pick = rerank(prob, cands, score, size_t(keep), opts.robust_tolerance);
    plan_result out;
    out.plan = cands[pick].plan;
    if (auto full = detail::estimate_with(prob, tab, net, out.plan)) out.detail = std::move(*full);
    else out.detail = cands[pick].detail;
    if (!score) out.plan.estimate = out.detail.summary();
    out.dp_states = stats.dp_states;
    out.configurations = stats.configurations;
    return out;
  });
}

namespace {

// The current plan repaired, as a candidate: replicas on GPUs that are gone are dropped, and
// every stage keeps as many replicas as the stage that lost most (nothing when none is left).
std::optional<detail::candidate> repaired_candidate(const problem& prob, const detail::tables& tab,
                                                    const detail::network& net,
                                                    const config::plan& current) {
  auto left = availability_of(prob.cluster);
  config::plan repaired = current;
  size_t D = SIZE_MAX;
  for (auto& s : repaired.stages) {
    std::vector<config::replica> keep;
    for (const auto& r : s.replicas) {
      int& n = left[r.gpu_type][r.zone];
      if (n >= r.tp) n -= r.tp, keep.push_back(r);
    }
    s.replicas = std::move(keep);
    D = std::min(D, s.replicas.size());
  }
  if (D == SIZE_MAX || D == 0) return std::nullopt;
  for (auto& s : repaired.stages) s.replicas.resize(D);
  repaired.global_batch = prob.job.global_batch;
  return detail::make_candidate(prob, tab, net, repaired);
}

}  // namespace

result<plan_result> replan(const problem& prob, const config::plan& current, const options& opts,
                           double tolerance) {
  return timed_search(prob, [&](const simulator::sim_context& ctx, const detail::tables& tab,
                                 const detail::network& net) -> result<plan_result> {
    detail::search_stats stats;
    auto cands = detail::search(prob, tab, net, opts, 24, tolerance + 0.01, stats);
    if (auto c = repaired_candidate(prob, tab, net, current)) cands.push_back(std::move(*c));
    std::stable_sort(cands.begin(), cands.end(), detail::better);
    if (cands.empty() || !cands.front().feasible) {
      if (cands.empty()) return explain_memory(prob, tab);
      return explain_constraints(prob, tab, net, opts);
    }
    const double best = cands.front().value;
    size_t pick = 0;
    double pick_kept = -1;
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!cands[i].feasible || cands[i].value > best * (1 + tolerance)) continue;
      double k = state_kept(prob, current, cands[i].plan);
      if (k > pick_kept + 1e-12) pick_kept = k, pick = i;
    }
    plan_result out;
    out.plan = cands[pick].plan;
    if (auto full = detail::estimate_with(prob, tab, net, out.plan)) out.detail = std::move(*full);
    else out.detail = cands[pick].detail;
    out.plan.estimate = out.detail.summary();
    if (const scorer score = effective_scorer(opts, ctx))
      if (auto e = score(out.plan)) out.plan.estimate = *e;
    out.dp_states = stats.dp_states;
    out.configurations = stats.configurations;
    return out;
  });
}

// ---- exhaustive reference ------------------------------------------------------------------

namespace {

struct exhaustive_state {
  const problem& prob;
  const detail::tables& tab;
  const detail::network& net;
  const options& opts;
  std::vector<std::string> zones;
  std::vector<std::vector<int>> left;  // [type][zone]
  int b = 1, D = 1, S = 1, m = 1;
  std::vector<config::stage_plan> stages;
  std::optional<detail::candidate> best;
  long long visited = 0;

  void leaf() {
    config::plan p;
    p.micro_batch = b;
    p.global_batch = prob.job.global_batch;
    p.stages = stages;
    ++visited;
    std::optional<detail::candidate> c;
    if (opts.score) {
      auto e = opts.score(p);
      if (!e) return;
      detail::candidate k;
      auto d = detail::estimate_with(prob, tab, net, p);
      if (!d) return;
      k.detail = *d;
      p.estimate = *e;
      k.plan = p;
      k.value = objective_value(prob.job, *e);
      k.feasible = d->fits_memory && meets_constraints(prob.job, *e);
      c = std::move(k);
    } else {
      c = detail::make_candidate(prob, tab, net, p);
    }
    if (!c || !c->feasible) return;
    if (!best || detail::better(*c, *best)) best = std::move(c);
  }

  // Splits `count` replicas over zones z.. for type g at TP t (as counts per zone).
  void zones_for(int s, int a, int e, int g, int t, bool rc, int zi, int count,
                 std::vector<config::replica>& reps) {
    if (count == 0) {
      config::stage_plan sp;
      sp.first_layer = a;
      sp.num_layers = e - a;
      sp.recompute = rc;
      sp.replicas = reps;
      stages.push_back(sp);
      stage(s + 1, e);
      stages.pop_back();
      return;
    }
    if (zi >= int(zones.size())) return;
    int most = std::min(count, left[g][zi] / t);
    for (int k = most; k >= 0; --k) {
      if (k == 0 && zi + 1 >= int(zones.size())) continue;
      left[g][zi] -= k * t;
      for (int i = 0; i < k; ++i) reps.push_back({tab.gpu_names()[g], zones[zi], t, {}, {}});
      zones_for(s, a, e, g, t, rc, zi + 1, count - k, reps);
      reps.resize(reps.size() - k);
      left[g][zi] += k * t;
    }
  }

  void stage(int s, int a) {
    const int n = tab.num_layers();
    if (s == S) {
      if (a == n) leaf();
      return;
    }
    int stages_left = S - s;
    for (int e = a + 1; e <= n - (stages_left - 1); ++e) {
      if (s == S - 1 && e != n) continue;
      for (int g = 0; g < int(tab.gpu_names().size()); ++g) {
        for (int t : tab.tps(g, b)) {
          const auto* c = tab.find(g, t, b);
          int in_flight = std::min(m, S - s);
          bool rc = false;
          if (tab.stage_memory(*c, a, e, false, in_flight) > tab.memory_bytes(g)) {
            if (!prob.job.allow_recompute ||
                tab.stage_memory(*c, a, e, true, in_flight) > tab.memory_bytes(g))
              continue;
            rc = true;
          }
          std::vector<config::replica> reps;
          zones_for(s, a, e, g, t, rc, 0, D, reps);
        }
      }
    }
  }
};

}  // namespace

result<plan_result> exhaustive_search(const problem& prob, const options& opts, int max_gpus) {
  return timed_search(prob, [&](const simulator::sim_context&, const detail::tables& tab,
                                 const detail::network& net) -> result<plan_result> {
    if (prob.cluster.total_gpus() > max_gpus)
      return error::invalid_input("cluster",
                                  "exhaustive search refuses " + std::to_string(prob.cluster.total_gpus()) +
                                      " GPUs (at most " + std::to_string(max_gpus) + ")");
    exhaustive_state st{prob, tab, net, opts, {}, {}, 1, 1, 1, 1, {}, std::nullopt, 0};
    for (const auto& z : prob.cluster.zones) st.zones.push_back(z.name);
    st.left.assign(tab.gpu_names().size(), std::vector<int>(st.zones.size(), 0));
    for (size_t zi = 0; zi < st.zones.size(); ++zi)
      for (const auto& [g, n] : prob.cluster.zones[zi].gpus) {
        int gi = tab.gpu_index(g);
        if (gi >= 0) st.left[gi][zi] += n;
      }
    const int total = prob.cluster.total_gpus();
    for (int b : tab.micro_batches()) {
      st.b = b;
      for (int D = 1; D <= std::min(total, std::max(1, prob.job.global_batch / b)); ++D) {
        st.D = D;
        st.m = (prob.job.global_batch + b * D - 1) / (b * D);
        for (int S = 1; S <= tab.num_layers() && S * D <= total; ++S) {
          if (opts.max_stages > 0 && S > opts.max_stages) break;
          st.S = S;
          st.stage(0, 0);
        }
      }
    }
    if (!st.best) return error::infeasible("cluster", "no plan fits and meets the constraints");
    plan_result out;
    out.plan = st.best->plan;
    out.detail = st.best->detail;
    if (!out.plan.estimate) out.plan.estimate = out.detail.summary();
    out.configurations = int(std::min<long long>(st.visited, 1 << 30));
    return out;
  });
}

}  // namespace sailor::planner
