#include "local_progress.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "preemption.hpp"
#include "recovery_summary.hpp"
#include "run_summary.hpp"
#include "sailor/actors/iteration_phases.hpp"
#include "sailor/actors/placement.hpp"

namespace sailor::app {

std::string progress_bar(int done, int total) {
  constexpr int width = 20;
  const int filled = total > 0 ? std::clamp(done * width / total, 0, width) : 0;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '-') + "]";
}

std::string local_progress::take(training_events& events, int live_nodes) {
  std::deque<actors::iteration_record> fresh;
  std::string error;
  {
    std::unique_lock lock{events.mu};
    events.cv.wait_for(lock, std::chrono::milliseconds{100}, [&] {
      return !events.iterations.empty() || events.finished || !events.error.empty();
    });
    fresh.swap(events.iterations);
    finished_ = events.finished;
    error = events.error;
    loss_curve_ = events.loss_curve;
    val_loss_curve_ = events.val_loss_curve;
    prediction_ = events.prediction;
    plan_ = events.plan;
    plans_ = events.plans;
    start_iteration_ = events.start_iteration;
    resume_source_ = events.resume_source;
    recoveries_ = events.recoveries;
  }
  live_nodes_ = live_nodes;
  if (plan_ && plans_ != plans_shown_)
    print_plan();
  for (auto& r : fresh) {
    const std::int64_t index = std::max<std::int64_t>(0, r.iteration - earlier_);
    if (index < static_cast<std::int64_t>(records_.size()))
      records_.resize(static_cast<std::size_t>(index));  // run again after a resume
    print_iteration(r);
    records_.push_back(r);
    history_.emplace_back(plans_, r);
    last_progress_ = clock_type::now();
    if (preempted_time_ && recovery_s_ < 0 && plans_ > 1)
      recovery_s_ = std::chrono::duration<double>(last_progress_ - *preempted_time_).count();
  }
  std::fflush(stdout);
  return error;
}

void local_progress::print_plan() {
  if (plans_shown_ == 0) {
    std::printf("  plan: %s\n  predicted iteration time %.4f s (%s)\n",
                actors::describe_plan(*plan_).c_str(), prediction_.predicted_s,
                prediction_.note.c_str());
    const int used = nodes_in(*plan_);
    if (used < live_nodes_)
      std::printf("  the plan uses %d of the %d nodes; the others stay idle (%s)\n", used,
                  live_nodes_,
                  prediction_.planner == "fixed"
                    ? "the plan file names no more"
                    : "the planner predicts no plan with them faster on this machine");
  } else {
    resumed_at_.push_back(start_iteration_);
    resumed_from_.push_back(resume_source_);
    const std::string resumed =
      start_iteration_ > 0 ? "resuming from " + actors::state_source_words(resume_source_) +
                               " after iteration " + std::to_string(start_iteration_)
                           : "no state left: training starts afresh";
    std::printf("  re-plan %d over %d nodes: %s\n  predicted iteration time %.4f s; %s\n",
                plans_ - 1, live_nodes_, actors::describe_plan(*plan_).c_str(),
                prediction_.predicted_s, resumed.c_str());
  }
  plans_shown_ = plans_;
  warm_up_.insert(start_iteration_);
  std::fflush(stdout);
}

template <class Keep>
double local_progress::tokens_per_s_where(Keep keep) const {
  double seconds = 0;
  std::int64_t tokens = 0;
  int last_plan = -1;
  for (const auto& [plan, r] : history_) {
    const bool first_of_plan = plan != last_plan;
    last_plan = plan;
    if (first_of_plan || !keep(plan, r.iteration))
      continue;
    seconds += r.measured_s;
    tokens += r.tokens;
  }
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
}

void local_progress::print_stage_predictions() const {
  if (prediction_.stages.empty())
    return;
  std::printf("  planner                %s; predicted per stage (compute + all-reduce, s):",
              prediction_.planner.empty() ? "?" : prediction_.planner.c_str());
  for (std::size_t k = 0; k < prediction_.stages.size(); ++k) {
    const auto& st = prediction_.stages[k];
    std::printf(" [%d,%d) %.4f+%.4f", st.first_layer, st.end_layer, st.compute_s, st.allreduce_s);
  }
  std::printf("\n");
}

void local_progress::print_iteration(const actors::iteration_record& r) const {
  const double tps = r.measured_s > 0 ? static_cast<double>(r.tokens) / r.measured_s : 0;
  std::printf("  %s iteration %3lld/%d  loss %.4f  tokens/s %8.0f  predicted %.4f s  "
              "measured %.4f s (compute %.4f, recv wait %.4f, all-reduce %.4f)",
              progress_bar(static_cast<int>(r.iteration + 1), iterations_).c_str(),
              static_cast<long long>(r.iteration + 1), iterations_, r.loss, tps,
              prediction_.predicted_s, r.measured_s, r.compute_s, r.recv_wait_s, r.all_reduce_s);
  if (r.val_loss)
    std::printf("  validation loss %.4f", *r.val_loss);
  std::printf("\n");
}

void local_progress::means(double& measured_s, double& tokens_per_s, int& counted) const {
  double sum = 0;
  std::int64_t tokens = 0;
  counted = 0;
  for (const auto& r : records_) {
    if (warm_up_.count(r.iteration) && records_.size() > warm_up_.size())
      continue;
    sum += r.measured_s;
    tokens += r.tokens;
    ++counted;
  }
  measured_s = counted ? sum / counted : 0;
  tokens_per_s = sum > 0 ? static_cast<double>(tokens) / sum : 0;
}

nlohmann::json local_progress::phases_json() const {
  const auto split = actors::median_phases(records_, warm_up_);
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : split.phases) j[name] = s;
  j["iteration"] = split.iteration_s;
  return j;
}

void local_progress::print_summary(const std::string& command, double wall_s) const {
  double measured = 0, tokens_per_s = 0;
  int counted = 0;
  means(measured, tokens_per_s, counted);
  std::printf("\nsailor %s: done in %.1f s\n", command.c_str(), wall_s);
  std::printf("  iterations completed   %d of %d", done(), iterations_);
  if (earlier_ > 0)
    std::printf(" (1..%d by the run this one resumed, %d..%d now)", earlier_, earlier_ + 1, iterations_);
  std::printf("\n");
  if (!loss_curve_.empty())
    std::printf("  loss                   %.4f -> %.4f\n", loss_curve_.front(),
                loss_curve_.back());
  if (!val_loss_curve_.empty()) {
    std::printf("  validation loss       ");
    for (const auto& v : val_loss_curve_)
      std::printf(" %lld: %.4f", static_cast<long long>(v.iteration), v.loss);
    std::printf("  (after iteration: loss)\n");
  }
  std::printf("  throughput             %.0f tokens/s (mean over %d iterations; each plan's "
              "first is left out)\n",
              tokens_per_s, counted);
  std::printf("  iteration time         measured %.4f s, predicted %.4f s (%s)\n", measured,
              prediction_.predicted_s, prediction_.note.c_str());
  if (prediction_.analytic_s > 0 && prediction_.analytic_s != prediction_.predicted_s)
    std::printf("                         (the catalog's analytic CPU model alone said %.4f s)\n",
                prediction_.analytic_s);
  print_stage_predictions();
  if (!records_.empty()) {
    const auto phases = phases_json();
    std::printf("  phases (median s)     ");
    for (const auto& name : actors::iteration_phase_names())
      std::printf(" %s %.4f", name.c_str(), phases.value(name, 0.0));
    std::printf("\n");
  }
  std::printf("  re-plans               %d", plans_ > 0 ? plans_ - 1 : 0);
  for (std::size_t k = 0; k < resumed_at_.size(); ++k)
    std::printf("%s after iteration %d from %s", k == 0 ? " (resumed" : ",", resumed_at_[k],
                actors::state_source_words(resumed_from_[k]).c_str());
  std::printf("%s\n", resumed_at_.empty() ? "" : ")");
  if (!preempted_.empty())
    std::printf("  preempted              %s; the next plan completed an iteration %.2f s later "
                "(noticing, re-planning, profiling, rendezvous, restoring)\n",
                preempted_.front().c_str(), recovery_s_);
  for (const auto& r : recoveries_)
    std::printf("  recovery               state from %s (%lld bytes restored), %d completed "
                "iterations run again; planning %.3f s, set-up %.3f s, restore %.3f s, first "
                "iteration %.3f s\n",
                r.state_source.c_str(), static_cast<long long>(r.bytes_restored),
                r.lost_iterations, r.planning_s, r.setup_s, r.restore_s, r.first_iteration_s);
  std::printf("  note: transfers and all-reduces that cross emulated zones are held for the "
              "link's latency and bandwidth.\n");
  std::fflush(stdout);
}

nlohmann::json local_progress::summary_json(double wall_s) const {
  double measured = 0, tokens_per_s = 0;
  int counted = 0;
  means(measured, tokens_per_s, counted);
  nlohmann::json j;
  j["iterations_completed"] = done();
  j["first_iteration"] = earlier_ + 1;  // of loss_curve (--resume: after the earlier run's)
  j["loss_curve"] = loss_curve_;
  j["val_loss_curve"] = val_loss_json(val_loss_curve_);
  j["tokens_per_s"] = tokens_per_s;
  j["predicted_iteration_s"] = prediction_.predicted_s;
  j["predicted_iteration_s_analytic"] = prediction_.analytic_s;
  j["prediction_note"] = prediction_.note;
  j["predicted_iteration_s_uncorrected"] = prediction_.uncorrected_s;
  j["correction_factor"] = prediction_.correction_factor;
  j["planner"] = prediction_.planner;
  j["predicted_stage_s"] = nlohmann::json::array();
  for (const auto& st : prediction_.stages)
    j["predicted_stage_s"].push_back({{"layers", {st.first_layer, st.end_layer}},
                                      {"compute_s", st.compute_s},
                                      {"allreduce_s", st.allreduce_s}});
  j["measured_iteration_s"] = measured;
  j["phases_s"] = phases_json();
  j["measured_iteration_s_median"] = j["phases_s"]["iteration"];
  j["replans"] = plans_ > 0 ? plans_ - 1 : 0;
  j["replan_reasons"] = replan_reasons_;
  if (link_change_at_ > 0) {
    j["link_change_at"] = link_change_at_;
    j["link_change"] = link_change_;
  }
  j["link_factors"] = link_factors_;
  j["loop_notes"] = loop_notes_;
  if (straggler_at_ > 0 || link_change_at_ > 0) {
    // Before the slowdown (or the link's change), between it and the plan made on drift, and
    // after that plan.
    const int drift = drift_plan_ > 0 ? drift_plan_ : plans_ + 1;
    const int at = straggler_at_ > 0 ? straggler_at_ : link_change_at_;
    if (straggler_at_ > 0)
      j["straggler_at"] = at;
    j["tokens_per_s_before"] =
      tokens_per_s_where([&](int plan, std::int64_t it) { return plan < drift && it < at; });
    j["tokens_per_s_during"] =
      tokens_per_s_where([&](int plan, std::int64_t it) { return plan < drift && it >= at; });
    j["tokens_per_s_after"] =
      tokens_per_s_where([&](int plan, std::int64_t) { return plan >= drift; });
  }
  j["resumed_at"] = resumed_at_;
  j["preempted"] = preempted_;
  add_recovery_fields(j, recoveries_,
                      recovery_s_ >= 0 ? std::vector<double>{recovery_s_} : std::vector<double>{});
  j["wall_s"] = wall_s;
  if (plan_) {
    j["plan"]["stages"] = plan_->num_stages();
    j["plan"]["micro_batch"] = plan_->micro_batch;
    j["plan"]["global_batch"] = plan_->global_batch;
    j["plan"]["summary"] = actors::describe_plan(*plan_);
    j["plan"]["nodes"] = nodes_in(*plan_);
  }
  std::vector<double> times;
  for (const auto& r : records_)
    times.push_back(r.measured_s);
  j["measured_iteration_s_each"] = times;
  return j;
}

}  // namespace sailor::app
