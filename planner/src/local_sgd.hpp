#pragma once
// DiLoCo across regions in the search: a plan whose data-parallel replicas span regions also
// competes as a DiLoCo plan (config::plan::local_sgd) when the job allows it.

#include <optional>
#include <vector>

#include "search.hpp"
#include "tables.hpp"

namespace sailor::planner::detail {

/// Whether the job lets plans that span regions run DiLoCo (allow_local_sgd, or
/// data_parallel.across_regions: diloco, which makes them).
bool may_join_regions(const config::job& job);

/// The inner steps the planner tries: the job's when it gives them, else 10, 25, 50, 100.
std::vector<int> inner_steps_to_try(const config::job& job);

/// `p` (synchronous) as a DiLoCo plan over its regions: each stage's replicas ordered by region
/// so that every pipeline stays in one (micro-batch m runs replica m mod count of each stage),
/// and the inner steps that score best on the job's objective (the fewest within
/// `inner_steps_tolerance` of the best: more inner steps cost convergence per token, which the
/// objective does not see). Nothing when `p` lies inside one region or its pipelines cannot
/// each stay inside one.
std::optional<candidate> diloco_candidate(const problem& prob, const tables& tab, const config::plan& p);

/// Fraction of the best objective within which fewer inner steps are preferred.
inline constexpr double inner_steps_tolerance = 0.01;

}  // namespace sailor::planner::detail
