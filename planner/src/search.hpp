#pragma once
// The search's internals, shared by plan_job, replan and the tests.

#include <vector>

#include "estimate.hpp"

namespace sailor::planner::detail {

/// A complete plan the search produced, with its closed-form estimate.
struct candidate {
  config::plan plan;
  estimate detail;
  double value = 0;  ///< objective (smaller is better), closed form
  bool feasible = false;  ///< meets the job's constraints and fits memory
  std::string key;        ///< canonical text of the plan (ties, duplicates)
};

struct search_stats {
  long long dp_states = 0;
  int configurations = 0;
  long long plans_scored = 0;  ///< complete plans scored by the closed form
};

/// The best `keep` plans by the closed form (feasible first, then by objective), deterministic.
/// `slack`: partial pipelines within this fraction of the best are kept alive, so that near-
/// equal alternatives reach the list (re-planning picks among them).
std::vector<candidate> search(const problem& prob, const tables& tab, const network& net,
                              const options& opts, int keep, double slack, search_stats& stats);

/// Orders candidates: feasible before infeasible, then objective, then fewer GPUs, then a
/// canonical text of the plan (so equal inputs give equal output).
bool better(const candidate& a, const candidate& b);

/// Evaluates `p`; returns a candidate (infeasible when it does not fit or violates constraints).
/// `with_key`: fill `key` (else left empty, for the caller to fill when it needs it).
std::optional<candidate> make_candidate(const problem& prob, const tables& tab, const network& net,
                                        config::plan p, bool with_key = true);

}  // namespace sailor::planner::detail
