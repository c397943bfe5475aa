#pragma once
// What the supervisor's callbacks tell the main thread of `sailor train` / `sailor demo`, and
// what the main thread makes of it: one progress line per iteration, the summary and its JSON.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::app {

/// One stage's predicted time per iteration: its slowest replica's compute (forward and
/// backward of every micro-batch, and the update) and its gradient all-reduce.
struct stage_prediction {
  int first_layer = 0, end_layer = 0;
  double compute_s = 0;
  double allreduce_s = 0;
};

/// The simulator's prediction of a plan (local_planning).
struct plan_prediction {
  /// The links' corrections the prediction was made with (simulator::link_key -> factor).
  std::map<std::string, double> link_factors;
  double predicted_s = 0;  ///< corrected by what the job measured (uncorrected_s x factor)
  double analytic_s = 0;  ///< from the catalog, without a profile
  std::string note;
  double uncorrected_s = 0;        ///< the simulator's, before the loop's correction
  double correction_factor = 1;    ///< measured over predicted, of the bottleneck's GPU type
  std::string bottleneck_type;     ///< GPU type of the bottleneck stage
  std::vector<stage_prediction> stages;
  std::string planner;             ///< search, even or fixed
};

/// Written by the supervisor's callbacks (its thread) and the planner, read by the main loop.
struct training_events {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<actors::iteration_record> iterations;  ///< not yet taken by the main loop
  std::vector<double> loss_curve;
  std::vector<actors::validation_point> val_loss_curve;
  bool finished = false;
  std::string error;
  plan_prediction prediction;
  std::optional<config::plan> plan;
  std::int64_t plan_version = 0;  ///< of the newest training plan
  int plans = 0;
  int start_iteration = 0;  ///< where the newest plan resumed
  std::string resume_source;  ///< what the newest plan resumed from (actors::state_source)
  std::vector<actors::recovery_record> recoveries;  ///< on_recovery, in order
};

/// The main loop's record of the run.
class local_progress {
public:
  using clock_type = std::chrono::steady_clock;
  /// `earlier`: iterations an earlier run of the job completed (sailor train --resume), which
  /// count as done; this run trains the rest.
  explicit local_progress(int iterations, int earlier = 0) : iterations_(iterations), earlier_(earlier) {}

  /// Takes what the callbacks wrote (waiting up to 100 ms for something); prints the plan
  /// when a new one came, and one line per completed iteration. Returns the training error,
  /// if any.
  std::string take(training_events& events, int live_nodes);
  bool finished() const { return finished_ && done() >= iterations_; }
  int done() const { return earlier_ + static_cast<int>(records_.size()); }
  int total() const { return iterations_; }
  clock_type::time_point last_progress() const { return last_progress_; }
  /// Re-planning and profiling after a loss take their time: no stall meanwhile.
  void touch() { last_progress_ = clock_type::now(); }
  void preempted(const std::string& node) {
    preempted_.push_back(node);
    preempted_time_ = clock_type::now();
    replan_reasons_.push_back(node + " preempted");
  }
  /// The emulated straggler was slowed after `iteration` iterations.
  void straggled(int iteration) { straggler_at_ = iteration; }
  /// The emulated link was changed (`change`, comm/link_table.hpp) after `iteration` iterations.
  void link_changed(int iteration, std::string change) {
    link_change_at_ = iteration;
    link_change_ = std::move(change);
  }
  /// What the closed loop noted (link corrections, a link drift not re-planned).
  void loop_note(std::string note) { loop_notes_.push_back(std::move(note)); }
  /// The zone pairs' corrections now (simulator::link_key -> measured over predicted).
  void link_factors(std::map<std::string, double> f) { link_factors_ = std::move(f); }
  /// The job asked for a re-plan on drift (the next plan is its answer).
  void drift_replan(const std::string& reason) {
    replan_reasons_.push_back(reason);
    if (drift_plan_ == 0)
      drift_plan_ = plans_ + 1;
  }
  const std::vector<actors::iteration_record>& records() const { return records_; }
  /// One iteration split by phase (data, forward_backward, send_wait, recv_wait, all_reduce,
  /// optimizer, checkpoint, bookkeeping) and its whole (`iteration`): medians in seconds over
  /// the iterations the means count, each the slowest rank's, as each rank measured it.
  nlohmann::json phases_json() const;
  const std::vector<std::string>& preempted_nodes() const { return preempted_; }

  /// The summary for people, after training.
  void print_summary(const std::string& command, double wall_s) const;
  /// The summary's JSON (`--summary-json`).
  nlohmann::json summary_json(double wall_s) const;

private:
  void print_plan();
  void print_iteration(const actors::iteration_record& r) const;
  void print_stage_predictions() const;
  // Mean measured iteration time and tokens/s, each plan's first iteration (warm-up) left
  // out when there are others.
  void means(double& measured_s, double& tokens_per_s, int& counted) const;

  int iterations_;
  int earlier_ = 0;  // completed by an earlier run: records_ starts after them
  std::vector<actors::iteration_record> records_;
  std::set<std::int64_t> warm_up_;  // the first iteration each plan ran
  std::vector<double> loss_curve_;
  std::vector<actors::validation_point> val_loss_curve_;
  plan_prediction prediction_;
  std::optional<config::plan> plan_;
  int plans_ = 0, plans_shown_ = 0, start_iteration_ = 0, live_nodes_ = 0;
  bool finished_ = false;
  std::vector<int> resumed_at_;
  std::vector<std::string> resumed_from_;  ///< one per resumed_at_: actors::state_source
  std::vector<std::string> preempted_;
  // From the preemption to the first iteration the next plan completed: noticing the loss,
  // re-planning, profiling the new plan, rendezvous and restoring the checkpoint.
  std::optional<clock_type::time_point> preempted_time_;
  double recovery_s_ = -1;
  // Every record as it came, with the plan (1, 2, ...) that ran it: iterations run again
  // after a resume replace records_, not these.
  std::vector<std::pair<int, actors::iteration_record>> history_;
  std::vector<std::string> replan_reasons_;
  int straggler_at_ = 0;
  int link_change_at_ = 0;
  std::string link_change_;
  std::vector<std::string> loop_notes_;
  std::map<std::string, double> link_factors_;
  int drift_plan_ = 0;  // the plan made on drift (0: none)
  // Tokens per second over the history's records that `keep` selects (each plan's first
  // iteration left out).
  template <class Keep> double tokens_per_s_where(Keep keep) const;
  std::string resume_source_;
  std::vector<actors::recovery_record> recoveries_;
  clock_type::time_point last_progress_ = clock_type::now();
};

/// "[#####-----]": `done` of `total` in 20 characters.
std::string progress_bar(int done, int total);

}  // namespace sailor::app
