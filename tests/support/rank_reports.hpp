#pragma once
// The rank reports the status board keeps (actors/status_board.hpp), as the drift tests feed
// them to `sailor`'s drift decision (apps/sailor/drift_watch.hpp) without a running job.
#include <cstdint>
#include <string>

#include "sailor/actors/status_board.hpp"

namespace sailor::testing {

/// Rank `rank` of plan version 1 on `node` (replica `rank`, stage `stage`) reporting iteration
/// `iteration`: its compute, all-reduce and whole iteration in seconds.
inline actors::board_rank_report rank_report(const std::string& node, int rank, int stage,
                                             std::int64_t iteration, double compute_s,
                                             double all_reduce_s = 0, double total_s = 0) {
  actors::board_rank_report b;
  b.report.plan_version = 1;
  b.report.node = node;
  b.report.rank = rank;
  b.report.replica = rank;
  b.report.stage = stage;
  b.report.iteration = iteration;
  b.report.compute_s = compute_s;
  b.report.all_reduce_s = all_reduce_s;
  b.report.total_s = total_s;
  return b;
}

}  // namespace sailor::testing
