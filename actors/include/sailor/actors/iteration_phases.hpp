#pragma once
/// One iteration's time split by phase, from the iterations the supervisor gathered: what the
/// run summary (`phases_s`) and the coordinator's dashboard (/api/metrics) both show.

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sailor/actors/train_progress.hpp"

namespace sailor::actors {

/// The phases in the order they are shown: data, forward_backward, send_wait, recv_wait,
/// all_reduce, optimizer, checkpoint, bookkeeping (what the others leave of the iteration:
/// reports, the schedule, glue).
const std::vector<std::string>& iteration_phase_names();

/// Medians in seconds over some iterations, each iteration's figures the slowest rank's as the
/// ranks measured them.
struct phase_split {
  /// (name, median seconds) in the order of iteration_phase_names().
  std::vector<std::pair<std::string, double>> phases;
  double iteration_s = 0;  ///< the median of the iterations' whole time
  int iterations = 0;      ///< how many iterations the medians are over
};

/// The split over `records`, leaving out those whose iteration is in `warm_up` (each plan's
/// first) when any other is left. Bookkeeping is taken per iteration, before the median.
phase_split median_phases(const std::vector<iteration_record>& records,
                          const std::set<std::int64_t>& warm_up);

}  // namespace sailor::actors
