#include "run_summary.hpp"

#include "recovery_summary.hpp"
#include "sailor/actors/job_journal.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

namespace sailor::app {

nlohmann::json val_loss_json(const std::vector<actors::validation_point>& curve) {
  auto out = nlohmann::json::array();
  for (const auto& v : curve)
    out.push_back({v.iteration, v.loss});
  return out;
}

void run_summary::on_plan(std::int64_t, int start_iteration, double predicted_s) {
  std::lock_guard lock{mutex_};
  ++plans_;
  if (start_iteration > 0)
    resumed_at_.push_back(start_iteration);
  predicted_s_ = predicted_s;
  awaiting_first_ = true;
  plan_started_ = clock::now();
}

void run_summary::on_iteration(const actors::iteration_record& r,
                               const actors::training_progress& p) {
  std::lock_guard lock{mutex_};
  const bool first = awaiting_first_;
  if (first && plans_ > 1)
    recovery_s_.push_back(std::chrono::duration<double>(clock::now() - plan_started_).count());
  awaiting_first_ = false;
  loss_curve_ = p.loss_curve();
  val_loss_curve_ = p.val_loss_curve();
  measured_s_.push_back(r.measured_s);
  tokens_.push_back(r.tokens);
  first_of_plan_.push_back(first);
}

void run_summary::continue_from(const actors::journal_contents& earlier) {
  std::lock_guard lock{mutex_};
  plans_ = static_cast<int>(earlier.plans.size());
  for (const auto& p : earlier.plans)
    if (p.start_iteration > 0)
      resumed_at_.push_back(p.start_iteration);
  recoveries_ = earlier.recoveries;
  for (int k = 0; k < earlier.completed(); ++k) {
    measured_s_.push_back(earlier.iterations[k].measured_s);
    tokens_.push_back(earlier.iterations[k].tokens);
    first_of_plan_.push_back(false);
    loss_curve_.push_back(earlier.iterations[k].loss);
  }
  if (earlier.initial_val_loss)
    val_loss_curve_.push_back({0, *earlier.initial_val_loss});
  for (int k = 0; k < earlier.completed(); ++k)
    if (earlier.iterations[k].val_loss)
      val_loss_curve_.push_back({k + 1, *earlier.iterations[k].val_loss});
}

void run_summary::on_recovery(const actors::recovery_record& r) {
  std::lock_guard lock{mutex_};
  recoveries_.push_back(r);
}

status run_summary::write(const std::string& path) const {
  std::lock_guard lock{mutex_};
  // Each plan's first iteration (warm-up: first rendezvous, restoring) is left out of the
  // means when there are others, as `sailor demo` does.
  double sum = 0;
  std::int64_t tokens = 0;
  int counted = 0;
  for (std::size_t k = 0; k < measured_s_.size(); ++k) {
    if (first_of_plan_[k] && measured_s_.size() > static_cast<std::size_t>(plans_))
      continue;
    sum += measured_s_[k];
    tokens += tokens_[k];
    ++counted;
  }
  nlohmann::json j;
  j["iterations_completed"] = loss_curve_.size();
  j["loss_curve"] = loss_curve_;
  j["val_loss_curve"] = val_loss_json(val_loss_curve_);
  j["replans"] = plans_ > 0 ? plans_ - 1 : 0;
  j["resumed_at"] = resumed_at_;
  // From the loss noticed (this process cannot see a kill) to the next completed iteration;
  // without a supervisor's record, from the re-plan.
  std::vector<double> each;
  for (const auto& r : recoveries_)
    each.push_back(r.total_s);
  add_recovery_fields(j, recoveries_, each.empty() ? recovery_s_ : each);
  j["recovery_s_each"] = recovery_s_;
  j["tokens_per_s"] = sum > 0 ? static_cast<double>(tokens) / sum : 0.0;
  j["predicted_iteration_s"] = predicted_s_;
  j["measured_iteration_s"] = counted ? sum / counted : 0.0;
  j["measured_iteration_s_each"] = measured_s_;
  j["wall_s"] = std::chrono::duration<double>(clock::now() - begin_).count();
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out)
    return sailor::error::of(error_kind::failed, path, "--summary-json", "cannot write " + path);
  return {};
}

}  // namespace sailor::app
