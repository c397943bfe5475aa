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
// Then hill climbing from the best plans kept (polish()) repairs what the program cannot see:
// cross-zone sends, egress, degrees that differ by stage.

#include "searcher.hpp"

#include "sailor/config/local_sgd.hpp"
#include "local_sgd.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

namespace sailor::planner::detail {

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
  if (p.local_sgd) {
    o += "|diloco ";
    o += std::to_string(p.local_sgd->inner_steps);
  }
  return o;
}

searcher::searcher(const problem& prob, const tables& tab, const network& net, const options& opts, int keep,
                   double slack, search_stats& stats)
    : prob_(prob),
      tab_(tab),
      net_(net),
      opts_(opts),
      keep_(keep),
      slack_(slack),
      stats_(stats),
      space_(prob, tab, opts),
      program_(space_, net),
      placer_(space_),
      moves_(space_) {}

std::vector<candidate> searcher::run() {
  if (space_.gpu_types() == 0 || space_.num_zones() == 0 || space_.global_batch() <= 0) return {};
  zone_sets_ = make_zone_sets(space_);
  for (const auto& c : configurations()) {
    if (!std::isfinite(c.lower_bound)) continue;
    if (!space_.cost_goal() && c.lower_bound >= threshold()) continue;
    if (space_.cost_goal() && prob_.job.limits.min_iterations_per_s &&
        c.lower_bound > 1.0 / *prob_.job.limits.min_iterations_per_s)
      continue;
    ++stats_.configurations;
    search_configuration(c.zone_set, c.mbs, c.replicas);
  }
  polish();
  return std::move(best_);
}

// --- configurations and their bounds ---------------------------------------------------------

std::vector<int> searcher::degrees_worth_trying(int zs, int b) const {
  const int gbs = space_.global_batch();
  const bool cost_goal = space_.cost_goal();
  const int dmax = std::min(std::max(1, gbs / b), simulator::resolved_plan::max_replicas);
  std::vector<int> out;
  for (int D = 1; D <= dmax; ++D) {
    if (budget_total(zs, D) == 0) break;
    if (!cost_goal && D < dmax && same_budget(zs, D, D + 1)) continue;
    // For throughput, a degree with as many micro-batches per replica as the next smaller one
    // is no faster (same schedule, a smaller budget per pipeline, a longer ring). Up to 64
    // every degree is tried all the same (the beam and the mixed-type augmentation are
    // heuristics, and do find better plans there now and then).
    if (!cost_goal && D > 64 && space_.micro_batches(b, D) == space_.micro_batches(b, D - 1)) continue;
    if (cost_goal && D > 32 && !(D == dmax || (gbs / b) % D == 0 || D % 8 == 0)) continue;
    out.push_back(D);
  }
  return out;
}

std::vector<searcher::configuration> searcher::configurations() const {
  std::vector<configuration> out;
  for (int zs = 0; zs < int(zone_sets_.size()); ++zs)
    for (int b : tab_.micro_batches()) {
      // The runtime runs whole micro-batches only (train/schedule.cpp), and a plan file says so.
      if (space_.global_batch() % b != 0) continue;
      for (int D : degrees_worth_trying(zs, b))
        out.push_back({lower_bound_time(zs, b, D, true), lower_bound_time(zs, b, D), zs, b, D});
    }
  std::stable_sort(out.begin(), out.end(), [](const configuration& a, const configuration& b) {
    return std::tie(a.order, a.zone_set, a.mbs, a.replicas) < std::tie(b.order, b.zone_set, b.mbs, b.replicas);
  });
  return out;
}

int searcher::budget_total(int zs, int D) const {
  int n = 0;
  for (int g = 0; g < space_.gpu_types(); ++g) n += space_.budget(zone_sets_[size_t(zs)], g, D);
  return n;
}

bool searcher::same_budget(int zs, int d1, int d2) const {
  const auto& set = zone_sets_[size_t(zs)];
  for (int g = 0; g < space_.gpu_types(); ++g)
    if (space_.budget(set, g, d1) != space_.budget(set, g, d2)) return false;
  return true;
}

// A pipeline's steady state runs at the pace of its bottleneck, so its speed (models per
// second, 1 / the time of one micro-batch through all its layers) is at most the sum of its
// stages' speeds; that sum is bounded both by the GPUs (each busy at its type's best
// efficiency) and by the stages (at most max_stages, none faster than the fastest replica).
// The first micro-batch also crosses every layer once. m micro-batches: at least
// (m - 1) / speed + that crossing. 10% below, as layers differ a little in their relative
// speed by type.
double searcher::lower_bound_time(int zs, int b, int D, bool for_order) const {
  const int n = space_.num_layers();
  double cap = 0, fastest = 0;
  for (int g = 0; g < space_.gpu_types(); ++g) {
    int budget = space_.budget(zone_sets_[size_t(zs)], g, D);
    if (budget == 0) continue;
    double eff = infinity;
    for (int t : tab_.tps(g, b)) {
      if (t > budget) continue;
      const double whole = tab_.find(g, t, b)->time(0, n, false);
      eff = std::min(eff, t * whole);
      if (whole > 0) fastest = std::max(fastest, 1.0 / whole);
    }
    if (std::isfinite(eff) && eff > 0) cap += budget / eff;
  }
  if (cap <= 0 || fastest <= 0) return infinity;
  const int m = space_.micro_batches(b, D);
  // Minimum cost visits configurations in the order of the GPUs' bound alone (it reaches
  // cheap plans sooner); the bound itself (for the throughput floor) is the tighter one.
  if (for_order && space_.cost_goal()) return 0.9 * m / cap;
  cap = std::min(cap, space_.max_stages() * fastest);
  return 0.9 * ((m - 1) / cap + 1.0 / fastest);
}

double searcher::threshold() const {
  if (best_.empty() || !best_.front().feasible) return infinity;
  double v = best_.back().value;
  if (int(best_.size()) < keep_) v = best_.front().value * (1 + slack_);
  return std::min(v, best_.front().value * (1 + slack_));
}

// --- one configuration: the program, then placement ------------------------------------------

void searcher::search_configuration(int zs, int b, int D) {
  std::array<int, max_gpu_types> budgets{};
  for (int g = 0; g < space_.gpu_types(); ++g) budgets[size_t(g)] = space_.budget(zone_sets_[size_t(zs)], g, D);
  const auto stage_options = program_.stage_options(zone_sets_[size_t(zs)], b, D, budgets);
  if (stage_options.empty()) return;
  const auto pipelines = program_.run(stage_options, b, D, threshold(), stats_);
  // The program's estimate is what it pruned by: pipelines the plans found since cannot beat
  // are not placed (placement only adds cross-zone sends and egress). The pipelines of one
  // configuration share their zones, micro-batch and replica count, so the ratio of a placed
  // plan's value to the program's estimate carries over from one to the next: once a placement
  // showed that the estimate was optimistic (pipelines or rings crossing zones), the others are
  // judged by the smallest ratio seen (10% margin). The estimate alone (ratio 1) is no bound:
  // it counts the slowest stage's sync in full.
  double ratio = 1;
  bool ratio_known = false;
  for (size_t i = 0; i < pipelines.size(); ++i) {
    const auto& [shape, rank] = pipelines[i];
    if (shape.empty() || shape.back().end != space_.num_layers()) continue;
    if (0.9 * rank * ratio < threshold()) {
      double v = consider(shape, zs, b, D);
      if (std::isfinite(v) && rank > 0) {
        const double r = std::max(1.0, v / rank);
        ratio = ratio_known ? std::min(ratio, r) : r;
        ratio_known = true;
      }
    }
    // Only the most promising pipelines are tried with more replicas than the budget allows.
    if (opts_.mixed_replicas && i < 2) augment(shape, zs, b, D);
  }
}

double searcher::consider(const pipeline_shape& shape, int zs, int b, int D) {
  const zone_set& set = zone_sets_[size_t(zs)];
  const bool single_zone = set.zones.size() == 1;
  double best = infinity;
  bool placed = false;
  // Pipeline-major, then stage-major in stage order and in order of GPUs per replica (in one
  // zone they place alike: the first that works is enough).
  for (auto order : {placement_order::pipeline_major, placement_order::stage_major,
                     placement_order::widest_stage_first}) {
    if (single_zone && order != placement_order::pipeline_major && placed) continue;
    auto p = placer_.place(shape, set, b, D, order, false);
    placed = p.has_value();
    if (!p && opts_.mixed_replicas) p = placer_.place(shape, set, b, D, order, true);
    if (p) best = std::min(best, offer(std::move(*p)));
  }
  return best;
}

void searcher::augment(const pipeline_shape& shape, int zs, int b, int D) {
  const zone_set& set = zone_sets_[size_t(zs)];
  const int dmax = std::min(std::max(1, space_.global_batch() / b), simulator::resolved_plan::max_replicas);
  const bool single_zone = set.zones.size() == 1;
  for (auto order : {placement_order::pipeline_major, placement_order::widest_stage_first}) {
    if (single_zone && order != placement_order::pipeline_major) break;
    int failures = 0;
    for (int D2 = D + 1; D2 <= dmax && failures < 2; ++D2) {
      if (space_.micro_batches(b, D2) == space_.micro_batches(b, D2 - 1) && D2 < dmax) continue;
      auto p = placer_.place(shape, set, b, D2, order, true);
      if (!p) {
        ++failures;
        continue;
      }
      offer(std::move(*p));
    }
  }
}

// --- the plans kept ----------------------------------------------------------------------------

double searcher::offer(config::plan p) {
  ++stats_.plans_scored;
  auto c = make_candidate(prob_, tab_, net_, std::move(p), false);
  if (!c) return infinity;
  double v = c->feasible ? c->value : infinity;
  offer(std::move(*c));
  return v;
}

void searcher::offer(candidate c) {
  // Keep the list sorted, without duplicates, at most keep_ long. Cheap rejections first
  // (before the canonical text, which only breaks exact ties).
  if (int(best_.size()) >= keep_) {
    const auto& w = best_.back();
    if (c.feasible != w.feasible) {
      if (!c.feasible) return;
    } else if (c.value != w.value) {
      if (c.value > w.value) return;
    } else if (c.plan.total_gpus() > w.plan.total_gpus()) {
      return;
    }
  }
  if (c.key.empty()) c.key = canonical(c.plan);
  if (int(best_.size()) >= keep_ && !better(c, best_.back())) return;
  for (const auto& b : best_)
    if (b.value == c.value && b.key == c.key) return;
  auto it = std::upper_bound(best_.begin(), best_.end(), c, better);
  best_.insert(it, std::move(c));
  if (int(best_.size()) > keep_) best_.pop_back();
}

// Each climb stops at a local optimum or when the budget of evaluations is spent; results only
// ever replace worse ones. Work is counted in replicas: evaluating a plan costs its replica
// count, generating a move (copying the plan) a quarter of it; so big plans get fewer moves
// than small ones.
void searcher::polish() {
  if (best_.empty() || opts_.polish_work <= 0) return;
  long long budget = opts_.polish_work;
  std::vector<candidate> starts(best_.begin(), best_.end());
  std::set<std::string> seen;
  for (auto cur : starts) {
    seen.insert(cur.key);
    while (budget > 0) {
      long long reps = 0;
      for (const auto& st : cur.plan.stages) reps += (long long)st.replicas.size();
      std::optional<candidate> step;
      moves_.for_each_neighbour(cur.plan, [&](config::plan&& q) {
        if (budget <= 0) return false;
        budget -= 1 + reps / 4;
        if (!moves_.normalize(q) || !moves_.within_availability(q)) return true;
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

// --- the search's interface --------------------------------------------------------------------

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
  // A plan that spans regions runs synchronously or by DiLoCo, whichever the objective
  // prefers (the job's across_regions: diloco: by DiLoCo); its local_sgd is chosen here anew.
  const bool join = may_join_regions(prob.job);
  if (join) p.local_sgd.reset();
  auto rp = simulator::resolve(tab.context(), p);
  if (!rp) return std::nullopt;
  candidate c;
  c.detail = simulator::closed_form(tab.context(), *rp);
  const auto e = c.detail.summary();
  c.value = objective_value(prob.job, e);
  c.feasible = c.detail.fits_memory && meets_constraints(prob.job, e);
  if (join) {
    auto d = diloco_candidate(prob, tab, p);
    const bool forced = prob.job.data_parallel.across_regions == config::across_regions_mode::diloco;
    if (forced && !d && config::regions_of(p, prob.cluster).size() > 1) return std::nullopt;
    if (d && (forced || (d->feasible && !c.feasible) || (d->feasible == c.feasible && d->value < c.value))) {
      if (with_key) d->key = canonical(d->plan);
      return d;
    }
  }
  p.estimate = e;
  c.plan = std::move(p);
  if (with_key) c.key = canonical(c.plan);
  return c;
}

std::vector<candidate> search(const problem& prob, const tables& tab, const network& net, const options& opts,
                              int keep, double slack, search_stats& stats) {
  searcher s(prob, tab, net, opts, keep, slack, stats);
  return s.run();
}

}  // namespace sailor::planner::detail
