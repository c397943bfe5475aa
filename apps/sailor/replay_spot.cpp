#include "replay_spot.hpp"

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "exit_codes.hpp"
#include "model_inputs.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/load.hpp"

namespace sailor::app {

namespace {

using json = nlohmann::json;

int replay_failed(const sailor::error& e) { return report_error("replay", e); }

// The problem and timeline from the options: the cluster's zones are the trace's (a --cluster
// gives prices, catalog and links, and must hold every zone of the trace).
result<planner::problem> load_problem(const spot_replay_options& opt, planner::availability_timeline& timeline) {
  auto inputs = load_model_inputs({opt.model, opt.sailor_data, opt.job, opt.profile});
  if (!inputs) return inputs.error();
  planner::problem prob;
  prob.model = inputs->model;
  prob.job = inputs->job;
  prob.profile = inputs->profile;
  // Sailor's network fits are for its GCP zones: used only without a --cluster of our own.
  if (inputs->data && opt.cluster.empty()) prob.network = inputs->data->network;
  config::cluster base;
  base.name = "trace";
  if (!opt.cluster.empty()) {
    auto c = config::load_cluster(opt.cluster);
    if (!c) return c.error();
    base = std::move(*c);
  } else if (inputs->data) {
    base.gpus = inputs->data->gpus;
  }
  auto t = planner::read_traces(opt.traces, base.gpus);
  if (!t) return t.error();
  if (opt.skip_empty_start) *t = planner::from_first_capacity(std::move(*t));
  planner::add_pool_columns(*t, base);  // the --cluster's on-demand pools beside the trace's spot GPUs
  if (auto err = planner::check_timeline(*t, base, !opt.cluster.empty())) return *err;
  // The planner sees the trace's zones only.
  for (auto& z : base.zones) z.gpus.clear();
  prob.cluster = planner::cluster_for(*t, base);
  if (opt.gbs > 0) prob.job.global_batch = opt.gbs;
  if (prob.job.global_batch <= 0) return sailor::error::invalid_input("--gbs", "a global batch size is required (--gbs or the job file)");
  timeline = std::move(*t);
  return prob;
}

void print_human(const std::vector<std::pair<std::string, planner::replay_totals>>& rows,
                 const planner::availability_timeline& t, double wall_s, int planner_calls) {
  std::printf("trace: %d ticks over %.1f days, %zu columns", t.ticks(), t.end_s / 86400, t.columns.size());
  for (const auto& c : t.columns) std::printf(" %s@%s", c.gpu_type.c_str(), c.zone.c_str());
  std::printf("\n");
  for (const auto& n : t.notes) std::printf("  %s\n", n.c_str());
  std::printf("%-24s %14s %12s %10s %12s %11s %9s %7s\n", "policy", "iterations", "dollars", "it/$", "lost it",
              "recovery s", "waiting h", "replans");
  for (const auto& [name, r] : rows)
    std::printf("%-24s %14.0f %12.2f %10.3f %12.1f %11.1f %9.1f %7d\n", name.c_str(), r.iterations, r.dollars,
                r.iterations_per_dollar(), r.lost_iterations, r.recovery_s_total, r.waiting_s / 3600, r.replans);
  for (const auto& [name, r] : rows)
    if (r.time_to_target_s >= 0) std::printf("%s: the target iterations after %.1f h\n", name.c_str(), r.time_to_target_s / 3600);
  const auto& ours = rows[0].second;
  for (size_t i = 2; i < rows.size(); ++i)
    if (rows[i].second.iterations_per_dollar() > 0)
      std::printf("ours / %s: %.2fx iterations per dollar\n", rows[i].first.c_str(),
                  ours.iterations_per_dollar() / rows[i].second.iterations_per_dollar());
  std::printf("replayed in %.2f s (%d planner calls)\n", wall_s, planner_calls);
}

// Ours, change by change: when, why, the new plan, its throughput and price, the stop and the loss.
void print_changes(const planner::replay_totals& r) {
  for (const auto& c : r.changes)
    std::printf("%9.0f s  %-22s %3d -> %3d GPUs  %.4f it/s  $%.2f/h  stop %.1f s  lost %.1f it  %s\n", c.at_s,
                c.why.c_str(), c.gpus_before, c.gpus_after, c.throughput_after, c.usd_per_hour_after, c.downtime_s,
                c.lost_iterations, c.plan_after.empty() ? "(waiting for capacity)" : c.plan_after.c_str());
}

}  // namespace

int run_spot_replay(const spot_replay_options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.traces.empty()) return replay_failed(sailor::error::invalid_input("--trace", "at least one trace file is required"));
  if (opt.objective != "liveput" && opt.objective != "throughput")
    return replay_failed(sailor::error::invalid_input("--objective", "expected liveput or throughput, got '" + opt.objective + "'"));
  planner::availability_timeline timeline;
  auto prob = load_problem(opt, timeline);
  if (!prob) return replay_failed(prob.error());
  planner::options popts;
  planner::spot_replayer replay(*prob, timeline, opt.recovery, popts);
  replay.set_target_iterations(opt.target_iterations);
  const auto objective = opt.objective == "liveput" ? planner::spot_objective::liveput : planner::spot_objective::throughput;
  std::vector<std::pair<std::string, planner::replay_totals>> rows;
  rows.emplace_back("ours", replay.run(planner::spot_policy::ours, objective));
  rows.emplace_back("ours_peak_throughput", replay.run(planner::spot_policy::ours, planner::spot_objective::throughput));
  rows.emplace_back("restart_from_checkpoint", replay.run(planner::spot_policy::restart_from_checkpoint));
  rows.emplace_back("static", replay.run(planner::spot_policy::static_plan));
  rows.emplace_back("on_demand", replay.run(planner::spot_policy::on_demand));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rows[0].second.changes.empty() && rows[4].second.changes.empty())
    return replay_failed(sailor::error{error_kind::infeasible,
                              "no plan at the start of the trace nor on the on-demand pool: " +
                                  replay.plan_for(timeline.counts[0]).why,
                              "", 0, "--model"});
  // Without a profile for a GPU type the figures are the catalog's peak FLOP/s times an
  // efficiency: say so.
  std::vector<std::string> notes;
  if (const auto& first = replay.plan_for(timeline.counts[0]); first.ok) notes = actors::estimate_notes(*prob, first.plan);
  if (opt.as_json) {
    json out;
    out["estimate_notes"] = notes;
    for (const auto& [name, r] : rows) {
      out[name] = json::parse(planner::totals_json(r, opt.changes));
      if (opt.target_iterations > 0 && r.time_to_target_s < 0) out[name]["time_to_target_s"] = nullptr;
    }
    out["objective"] = opt.objective;
    out["trace"] = {{"ticks", timeline.ticks()}, {"span_s", timeline.end_s}, {"tick_s", timeline.tick_s},
                    {"columns", timeline.columns.size()}, {"notes", timeline.notes}};
    out["replay_s"] = wall_s;
    out["planner_calls"] = replay.planner_calls();
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    if (opt.changes) print_changes(rows[0].second);
    print_human(rows, timeline, wall_s, replay.planner_calls());
    for (const auto& n : notes) std::printf("analytic estimate: %s\n", n.c_str());
  }
  return 0;
}

}  // namespace sailor::app
