#pragma once
// The closed loop's line in `sailor status` (issue 14): the running plan's predicted iteration
// time against what its iterations measure, and what the last re-plan bought (the plan
// before it against this one, both measured).
#include <string>
#include <vector>

#include "sailor/actors/train_progress.hpp"

namespace sailor::actors {

/// What the status shows of one training run.
struct prediction_status {
  double predicted_s = 0;  ///< the running plan's prediction (0: none)
  double measured_s = 0;   ///< median of its last iterations, its first (warm-up) left out
  double ratio = 0;        ///< measured / predicted (0: either missing)
  double before_s = 0;     ///< the previous plan's median over its last iterations (0: none)
  double realised_gain = 0;  ///< 1 - measured / before (0: no re-plan measured yet)
};

/// From the completed iterations of the job (`completed`, in order; those before
/// `start_iteration` ran under earlier plans) and the running plan's prediction. `window`:
/// iterations each median spans.
prediction_status prediction_of_run(double predicted_s, std::int64_t start_iteration,
                                    const std::vector<iteration_record>& completed,
                                    std::size_t window = 3);

/// "; predicted 0.0600 s per iteration, measured 0.0520 s (x0.87); last re-plan: 0.3500 ->
/// 0.0520 s measured (realised gain +85%)", the parts there are figures for ("" : none).
std::string prediction_text(const prediction_status& s);

}  // namespace sailor::actors
