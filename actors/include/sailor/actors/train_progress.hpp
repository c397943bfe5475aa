#pragma once
/// Gathering the ranks' train_reports into iterations (header-only, no LibTorch): the
/// supervisor keeps one of these per training plan.

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "sailor/actors/train_messages.hpp"

namespace sailor::actors {

/// Ranks of a plan: the sum of the TP degrees of every replica of every stage.
inline int plan_world_size(const config::plan& p) {
  int n = 0;
  for (auto& s : p.stages)
    for (auto& r : s.replicas)
      n += r.tp;
  return n;
}

/// One iteration once every rank reported it. Times are the slowest rank's.
struct iteration_record {
  std::int64_t iteration = 0;
  double loss = 0;         ///< from the last stage (the same on every rank)
  double measured_s = 0;   ///< slowest rank's iteration time
  double compute_s = 0;
  double send_wait_s = 0;
  double recv_wait_s = 0;
  double all_reduce_s = 0;
  double data_s = 0;
  double optimizer_s = 0;
  double checkpoint_s = 0;
  std::int64_t tokens = 0;
  int reports = 0;
  /// The validation loss after this iteration, when a validation pass ran (the job's
  /// eval_every), from the same rank as `loss`.
  std::optional<double> val_loss;
};

/// The phase of the report (kind reached) that carries the validation loss of the weights a
/// fine-tuning job starts from, before its first iteration (training_job::init_from).
inline constexpr const char* initial_validation_phase = "validation";

/// One point of the validation curve: iterations completed (1-based, as the progress line
/// counts them) and the loss.
struct validation_point {
  std::int64_t iteration = 0;
  double loss = 0;
};

class training_progress {
public:
  training_progress() = default;
  training_progress(std::int64_t plan_version, int world, int iterations, int last_stage,
                    double predicted_s)
      : plan_version_(plan_version), world_(world), iterations_(iterations),
        last_stage_(last_stage), predicted_s_(predicted_s) {}

  /// A plan that resumes from the checkpoint after `start_iteration` iterations: keeps the
  /// records of `earlier` (a previous plan's) before that iteration, so the loss curve and
  /// the count of completed iterations run on across re-plans.
  training_progress(std::int64_t plan_version, int world, int iterations, int last_stage,
                    double predicted_s, int start_iteration,
                    const std::vector<iteration_record>& earlier)
      : training_progress(plan_version, world, iterations, last_stage, predicted_s) {
    start_iteration_ = start_iteration;
    for (const auto& r : earlier)
      if (r.iteration < start_iteration)
        completed_.push_back(r);
  }

  /// Adds a report; returns the iteration it completes, if any. A report of another plan
  /// version is ignored. A failure is kept (see error(), failure()) whatever its iteration:
  /// the ranks of a resumed plan that fail before their first iteration must be heard. A
  /// start-up step reached, and the first iteration, count towards reached(); a checkpoint
  /// write failure is the supervisor's to tell (it changes nothing here). Iteration reports
  /// before the resume point are old news and dropped.
  std::optional<iteration_record> add(const train_report& r) {
    if (r.plan_version != plan_version_ || world_ == 0)
      return std::nullopt;
    switch (r.what()) {
      case report_kind::failed:
        if (error_.empty()) {
          error_ = r.node + " rank " + std::to_string(r.rank) +
                   (r.phase.empty() ? "" : " (" + r.phase + ")") + ": " + r.error;
          failure_ = r;
        }
        return std::nullopt;
      case report_kind::reached:
        if (r.phase == "setup" || r.phase == "restore")  // the steps there are (bounded map)
          ++reached_[r.phase][r.node];
        if (r.phase == initial_validation_phase && r.has_val_loss && r.stage == last_stage_ &&
            r.tp_rank == 0 && r.replica == 0)
          initial_val_loss_ = r.val_loss;
        return std::nullopt;
      case report_kind::iteration:
        break;
      default:
        return std::nullopt;  // checkpoint_failed, or a kind this build does not know
    }
    if (r.iteration < start_iteration_)
      return std::nullopt;
    if (r.iteration == start_iteration_)
      ++reached_[first_iteration_step][r.node];
    auto& rec = pending_[r.iteration];
    rec.iteration = r.iteration;
    ++rec.reports;
    // The loss is all-reduced over the plan: replica 0's, else the first last-stage rank's.
    if (r.stage == last_stage_ && r.tp_rank == 0 && (r.replica == 0 || !with_loss_.count(r.iteration))) {
      with_loss_.insert(r.iteration);
      rec.loss = r.loss;
      if (r.has_val_loss)
        rec.val_loss = r.val_loss;
    }
    rec.measured_s = std::max(rec.measured_s, r.total_s);
    rec.compute_s = std::max(rec.compute_s, r.compute_s);
    rec.send_wait_s = std::max(rec.send_wait_s, r.send_wait_s);
    rec.recv_wait_s = std::max(rec.recv_wait_s, r.recv_wait_s);
    rec.all_reduce_s = std::max(rec.all_reduce_s, r.all_reduce_s);
    rec.data_s = std::max(rec.data_s, r.data_s);
    rec.optimizer_s = std::max(rec.optimizer_s, r.optimizer_s);
    rec.checkpoint_s = std::max(rec.checkpoint_s, r.checkpoint_s);
    rec.tokens = r.tokens;
    if (rec.reports < world_)
      return std::nullopt;
    auto done = rec;
    pending_.erase(r.iteration);
    with_loss_.erase(r.iteration);
    completed_.push_back(done);
    return done;
  }

  /// Iterations of this plan that its ranks finished but did not all report: a node was lost
  /// after the iteration's last collective and before its report reached the supervisor. When
  /// the next plan resumes after them (the survivors' state includes them), they are settled
  /// with the loss a last-stage rank reported, so that they count and are never skipped unseen.
  std::vector<iteration_record> unreported_before(int start_iteration) const {
    std::vector<iteration_record> out;
    for (const auto& [iteration, rec] : pending_)
      if (iteration < start_iteration && with_loss_.count(iteration))
        out.push_back(rec);
    return out;
  }

  bool active() const { return world_ > 0; }
  /// Iterations the job has done: those before the checkpoint this plan resumed from (the
  /// job's own record, whichever plan or coordinator process ran them) and those completed
  /// since. Not completed().size(): a coordinator restarted on an existing job has no records
  /// of the iterations before its checkpoint.
  int completed_count() const {
    int n = start_iteration_;
    for (const auto& c : completed_)
      if (c.iteration >= start_iteration_)
        ++n;
    return n;
  }
  bool finished() const { return world_ > 0 && completed_count() >= iterations_; }
  const std::vector<iteration_record>& completed() const { return completed_; }
  std::vector<double> loss_curve() const {
    std::vector<double> out;
    for (auto& c : completed_)
      out.push_back(c.loss);
    return out;
  }
  /// The validation passes of the completed iterations (kept across re-plans as the loss
  /// curve is), after the pass on the starting weights at 0 when there was one.
  std::vector<validation_point> val_loss_curve() const {
    std::vector<validation_point> out;
    if (initial_val_loss_)
      out.push_back({0, *initial_val_loss_});
    for (auto& c : completed_)
      if (c.val_loss)
        out.push_back({c.iteration + 1, *c.val_loss});
    return out;
  }
  const std::string& error() const { return error_; }
  /// The first failure report of this plan (meaningful when error() is not empty).
  const train_report& failure() const { return failure_; }
  /// The name reached() gives the first iteration of the plan (every rank reported it).
  static constexpr const char* first_iteration_step = "first iteration";
  /// How many ranks of `node` reported start-up step `step` ("setup", "restore", or
  /// first_iteration_step).
  int reached(const std::string& step, const std::string& node) const {
    auto s = reached_.find(step);
    if (s == reached_.end())
      return 0;
    auto n = s->second.find(node);
    return n == s->second.end() ? 0 : n->second;
  }
  /// How many ranks in all reported start-up step `step`.
  int reached(const std::string& step) const {
    int n = 0;
    if (auto s = reached_.find(step); s != reached_.end())
      for (const auto& [node, count] : s->second)
        n += count;
    return n;
  }
  std::int64_t plan_version() const { return plan_version_; }
  int world() const { return world_; }
  int iterations() const { return iterations_; }
  /// The first iteration this plan runs (0, or where it resumed).
  int start_iteration() const { return start_iteration_; }
  /// The validation loss of the weights the job started from (a fine-tuning job's pass
  /// before its first iteration), carried to the next plan with set_initial_val_loss.
  std::optional<double> initial_val_loss() const { return initial_val_loss_; }
  void set_initial_val_loss(std::optional<double> v) { initial_val_loss_ = v; }
  double predicted_s() const { return predicted_s_; }

private:
  std::int64_t plan_version_ = 0;
  int world_ = 0;
  int iterations_ = 0;
  int last_stage_ = 0;
  double predicted_s_ = 0;
  int start_iteration_ = 0;
  std::map<std::int64_t, iteration_record> pending_;
  std::set<std::int64_t> with_loss_;  // pending iterations a last-stage rank reported
  std::vector<iteration_record> completed_;
  std::string error_;
  train_report failure_;
  std::map<std::string, std::map<std::string, int>> reached_;  // step -> node -> ranks
  std::optional<double> initial_val_loss_;
};

}  // namespace sailor::actors
