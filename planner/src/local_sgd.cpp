// DiLoCo across regions as one more way to run a plan that spans regions: the same replicas,
// ordered by region, each region's pipelines synchronised every iteration and the regions every
// H iterations (the simulator prices it: simulator/src/local_sgd.cpp).
#include "local_sgd.hpp"

#include <algorithm>
#include <cmath>

#include "sailor/config/local_sgd.hpp"

namespace sailor::planner::detail {

bool may_join_regions(const config::job& job) {
  return job.allow_local_sgd || job.data_parallel.across_regions == config::across_regions_mode::diloco;
}

std::vector<int> inner_steps_to_try(const config::job& job) {
  if (job.data_parallel.inner_steps > 0) return {job.data_parallel.inner_steps};
  return {10, 25, 50, 100};
}

namespace {

// The index of a zone's region in `regions` (regions_of lists every zone the plan uses).
int region_index(const std::vector<config::local_sgd_plan::region>& regions, const std::string& zone) {
  for (size_t i = 0; i < regions.size(); ++i)
    if (std::find(regions[i].zones.begin(), regions[i].zones.end(), zone) != regions[i].zones.end()) return int(i);
  return -1;
}

// Orders each stage's replicas by region (stable: the placer's order inside a region is kept)
// and checks that every micro-batch's path stays in one region and every region trains some.
bool pair_within_regions(config::plan& p, const std::vector<config::local_sgd_plan::region>& regions) {
  std::vector<std::vector<int>> region_of(p.stages.size());
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& reps = p.stages[s].replicas;
    std::vector<std::pair<int, size_t>> order;
    for (size_t r = 0; r < reps.size(); ++r) order.emplace_back(region_index(regions, reps[r].zone), r);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<config::replica> sorted;
    for (const auto& [g, r] : order) {
      sorted.push_back(reps[r]);
      region_of[s].push_back(g);
    }
    reps = std::move(sorted);
  }
  const int micro_batches = p.global_batch / std::max(1, p.micro_batch);
  std::vector<char> trains(regions.size(), 0);
  for (int m = 0; m < micro_batches; ++m) {
    const int g = region_of[0][size_t(m) % region_of[0].size()];
    for (size_t s = 1; s < p.stages.size(); ++s)
      if (region_of[s][size_t(m) % region_of[s].size()] != g) return false;
    trains[size_t(g)] = 1;
  }
  return std::all_of(trains.begin(), trains.end(), [](char t) { return t != 0; });
}

}  // namespace

std::optional<candidate> diloco_candidate(const problem& prob, const tables& tab, const config::plan& p) {
  auto regions = config::regions_of(p, prob.cluster);
  if (regions.size() < 2) return std::nullopt;
  config::plan joined = p;
  if (!pair_within_regions(joined, regions)) return std::nullopt;
  joined.local_sgd = config::local_sgd_plan{1, std::move(regions)};
  auto rp = simulator::resolve(tab.context(), joined);
  if (!rp) return std::nullopt;
  // The closed form for each H; the fewest inner steps within the tolerance of the best.
  std::vector<std::pair<int, candidate>> tried;
  double best = INFINITY;
  for (int h : inner_steps_to_try(prob.job)) {
    rp->inner_steps = h;
    candidate c;
    c.detail = simulator::closed_form(tab.context(), *rp);
    const auto e = c.detail.summary();
    c.value = objective_value(prob.job, e);
    c.feasible = c.detail.fits_memory && meets_constraints(prob.job, e);
    if (c.feasible) best = std::min(best, c.value);
    tried.emplace_back(h, std::move(c));
  }
  auto pick = tried.begin();
  for (auto it = tried.begin(); it != tried.end(); ++it) {
    if (std::isfinite(best) ? it->second.feasible && it->second.value <= best * (1 + inner_steps_tolerance)
                            : it->second.value < pick->second.value) {
      pick = it;
      if (std::isfinite(best)) break;  // tried in increasing order: the fewest that qualify
    }
  }
  candidate out = std::move(pick->second);
  joined.local_sgd->inner_steps = pick->first;
  joined.estimate = out.detail.summary();
  out.plan = std::move(joined);
  return out;
}

}  // namespace sailor::planner::detail
