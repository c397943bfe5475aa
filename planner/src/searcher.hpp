#pragma once
// The search, tying its parts together (search.cpp has the pruning in the order it bites):
// zone sets (zone_sets.hpp) x micro-batch sizes x data-parallel degrees, ordered by a lower
// bound on the iteration time and cut by the best plan so far; for each, the dynamic program
// (stage_program.hpp) and the placement of the pipelines it keeps (placement.hpp); then local
// moves from the best plans (local_moves.hpp). The best `keep` plans are kept, sorted.

#include <array>
#include <vector>

#include "local_moves.hpp"
#include "placement.hpp"
#include "search.hpp"
#include "stage_program.hpp"
#include "zone_sets.hpp"

namespace sailor::planner::detail {

class searcher {
public:
  searcher(const problem& prob, const tables& tab, const network& net, const options& opts, int keep,
           double slack, search_stats& stats);
  /// The best `keep` plans, best first.
  std::vector<candidate> run();

private:
  /// One (zone set, micro-batch, data-parallel degree) to search, with its lower bounds.
  struct configuration {
    double order, lower_bound;
    int zone_set, mbs, replicas;
  };
  std::vector<configuration> configurations() const;
  std::vector<int> degrees_worth_trying(int zs, int mbs) const;
  double lower_bound_time(int zs, int mbs, int replicas, bool for_order = false) const;
  int budget_total(int zs, int replicas) const;
  bool same_budget(int zs, int d1, int d2) const;
  /// The objective value a plan must beat to be kept (infinite until a feasible one is).
  double threshold() const;

  void search_configuration(int zs, int mbs, int replicas);
  /// Places `shape` in the ways worth trying and offers the plans; the best feasible objective
  /// value among them (infinite if none).
  double consider(const pipeline_shape& shape, int zs, int mbs, int replicas);
  /// More pipelines than the per-type budget allows, with replicas of other types standing in
  /// where a type runs out: uses the GPUs that the uniform budget leaves idle.
  void augment(const pipeline_shape& shape, int zs, int mbs, int replicas);
  double offer(config::plan p);
  void offer(candidate c);
  /// Hill climbing from the best plans kept, scored by the closed form.
  void polish();

  const problem& prob_;
  const tables& tab_;
  const network& net_;
  const options& opts_;
  int keep_;
  double slack_;
  search_stats& stats_;
  search_space space_;
  std::vector<zone_set> zone_sets_;
  stage_program program_;
  placer placer_;
  local_moves moves_;
  std::vector<candidate> best_;
};

/// Canonical text of a plan: ties and duplicates are told apart by it.
std::string canonical(const config::plan& p);

}  // namespace sailor::planner::detail
