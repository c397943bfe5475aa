#pragma once
// What a training run reports at its end, for automation: the fields `sailor demo
// --summary-json` writes, gathered by `sailor coordinator --summary-json` from the
// supervisor's callbacks (which run on the supervisor's thread; the summary is written from
// main's).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {
struct journal_contents;
}

namespace sailor::app {

/// The validation curve as the summary JSON writes it: [[iterations completed, loss], ...].
nlohmann::json val_loss_json(const std::vector<actors::validation_point>& curve);

class run_summary {
public:
  /// A plan starts training at `start_iteration` (0: afresh), predicted at `predicted_s` per
  /// iteration (0: no prediction).
  void on_plan(std::int64_t plan_version, int start_iteration, double predicted_s);
  /// An iteration completed (every rank reported it).
  void on_iteration(const actors::iteration_record& r, const actors::training_progress& p);
  /// A recovery completed (the supervisor's record).
  void on_recovery(const actors::recovery_record& r);
  /// Starts from what an earlier coordinator of the job journaled: its plans, recoveries and
  /// the iterations it completed in a row (their times, as measured then).
  void continue_from(const actors::journal_contents& earlier);
  /// Writes the JSON summary to `path`.
  status write(const std::string& path) const;

private:
  using clock = std::chrono::steady_clock;
  mutable std::mutex mutex_;
  int plans_ = 0;
  std::vector<int> resumed_at_;
  std::vector<double> loss_curve_;
  std::vector<actors::validation_point> val_loss_curve_;
  std::vector<double> measured_s_;
  std::vector<std::int64_t> tokens_;
  std::vector<bool> first_of_plan_;
  double predicted_s_ = 0;
  bool awaiting_first_ = false;
  clock::time_point plan_started_{};
  std::vector<double> recovery_s_;  // re-plan to its first completed iteration
  std::vector<actors::recovery_record> recoveries_;
  clock::time_point begin_ = clock::now();
};

}  // namespace sailor::app
