// `sailor replay`: an availability trace through the re-planner.
//
//   sailor replay --sailor-data DIR --model OPT-350 --trace gpu_trace_multizone.csv [--gbs N]
//     one plan per step of Sailor's trace (one row per time step, one column per `GPU_zone`):
//     step 0 planned from scratch, each later step re-planned from the previous plan.
//   sailor replay --trace T... --model M.yaml --job J.yaml [--cluster C.yaml] [--json]
//     the whole timeline simulated: ours against restart-from-checkpoint, a static plan and
//     on-demand only (replay_spot.cpp); also with a .json trace or several traces.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "replay_live.hpp"
#include "replay_spot.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::app {

namespace {

struct replay_options {
  std::string sailor_data, model, trace;
  int gbs = 0;
  spot_replay_options spot;
  bool live = false;
  live_replay_options live_opt;
};

// The simulated replay of a whole timeline is asked for by a job file, --json, a spot trace or
// several traces; Sailor's step-by-step listing otherwise.
bool wants_timeline(const replay_options& opt) {
  if (!opt.spot.job.empty() || opt.spot.as_json || opt.spot.traces.size() > 1 || !opt.spot.cluster.empty()) return true;
  const auto& t = opt.spot.traces.empty() ? std::string() : opt.spot.traces.front();
  return t.size() >= 5 && t.compare(t.size() - 5, 5, ".json") == 0;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  return out;
}

int run_replay(const replay_options& opt) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "sailor replay: %s\n", msg.c_str());
    return 2;  // every failure here is bad input: options, Sailor's data, the trace (exit_codes.hpp)
  };
  if (opt.sailor_data.empty() || opt.model.empty() || opt.trace.empty())
    return fail("--sailor-data, --model and --trace are required");
  auto data = config::load_sailor_data(opt.sailor_data, opt.model);
  if (!data) return fail(data.error().to_string());
  std::ifstream in(opt.trace);
  if (!in) return fail(opt.trace + ": cannot open file");
  std::string line;
  if (!std::getline(in, line)) return fail(opt.trace + ": empty trace");
  auto header = split(line);
  std::vector<std::pair<std::string, std::string>> columns;  // (gpu, zone) per column, or empty
  for (const auto& h : header) {
    auto pos = h.find('_');
    if (pos == std::string::npos) columns.emplace_back("", "");
    else columns.emplace_back(h.substr(0, pos), h.substr(pos + 1));
  }
  planner::problem prob;
  prob.model = data->model;
  prob.profile = data->profile;
  prob.network = data->network;
  prob.job.optimizer = data->optimizer;
  prob.job.global_batch = opt.gbs > 0 ? opt.gbs : data->default_global_batch;
  std::optional<config::plan> current;
  int step = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto cells = split(line);
    planner::availability avail;
    for (size_t i = 0; i < cells.size() && i < columns.size(); ++i) {
      if (columns[i].first.empty()) continue;
      try {
        int n = std::stoi(cells[i]);
        if (n > 0) avail[columns[i].first][columns[i].second] = n;
      } catch (...) {
        return fail(opt.trace + ":" + std::to_string(step + 2) + ": column " + header[i] + ": expected a count");
      }
    }
    prob.cluster = config::cluster_from_quotas(avail, *data);
    auto r = current ? planner::replan(prob, *current) : planner::plan_job(prob);
    std::printf("step %d:", step);
    for (const auto& [g, zones] : avail)
      for (const auto& [z, n] : zones) std::printf(" %s@%s=%d", g.c_str(), z.c_str(), n);
    std::printf("\n");
    if (!r) {
      std::printf("  no plan: %s\n", r.error().to_string().c_str());
    } else {
      double kept = current ? planner::state_kept(prob, *current, r->plan) : 0.0;
      std::printf("  %s\n  %d GPUs, %.4f it/s, $%.4f/iter, search %.1f ms%s\n", planner::summary(r->plan).c_str(),
                  r->plan.total_gpus(), r->plan.estimate->throughput_iters_per_s,
                  r->plan.estimate->cost_per_iteration_usd, r->search_s * 1e3,
                  current ? (", state kept " + std::to_string(int(kept * 100 + 0.5)) + "%").c_str() : "");
      // Without a profile for a GPU type, the figures are the catalog's peak FLOP/s times an
      // efficiency: say so, with the efficiency assumed.
      for (const auto& note : actors::estimate_notes(prob, r->plan))
        std::printf("  analytic estimate: %s\n", note.c_str());
      current = r->plan;
    }
    ++step;
  }
  return 0;
}

}  // namespace

void add_replay(CLI::App& app, command_set& commands) {
  auto opt = std::make_shared<replay_options>();
  auto* sub = app.add_subcommand("replay", "Replay an availability trace through the re-planner");
  auto& sp = opt->spot;
  auto& rec = sp.recovery;
  sub->add_option("--sailor-data", opt->sailor_data, "A folder with the layout of a Sailor checkout");
  sub->add_option("--model", opt->model, "A model YAML file or a model name");
  sub->add_option("--trace", sp.traces,
                  "Trace files: Sailor's gpu_trace_*.csv or spot-traces JSON (<zone>_<gpu>_*.json); several combine");
  sub->add_option("--gbs", opt->gbs, "Global batch size (default: the job file's or the model's training config)");
  sub->add_option("--job", sp.job, "A job YAML file (the simulated replay of the whole timeline)");
  sub->add_option("--cluster", sp.cluster, "A cluster YAML file: prices, GPU catalog, links (default: the trace's zones); its on-demand pools "
                  "(<type>/on-demand) are capacity the trace never takes away, with --live too");
  sub->add_option("--profile", sp.profile, "A profile JSON file of `sailor profile`");
  sub->add_flag("--json", sp.as_json, "Print one JSON object: ours, ours_peak_throughput, restart_from_checkpoint, static, on_demand");
  sub->add_option("--objective", sp.objective, "How ours chooses plans: liveput (expected throughput under preemption) or throughput");
  sub->add_flag("--node-local-checkpoints", [&rec](std::int64_t) { rec.checkpoints_outlive_nodes = false; },
                "Ours keeps checkpoints only on the nodes (a coordinator without --keep-checkpoints): every node gone "
                "starts over from iteration 0 (a whole stage lost resumes from the copies on another stage)");
  sub->add_option("--target-iterations", sp.target_iterations, "Report when each policy has completed this many iterations")
      ->check(positive_number());
  sub->add_flag("--changes", sp.changes, "Every change of plan of ours (with --json: of every policy)");
  sub->add_flag("--skip-empty-start", sp.skip_empty_start, "Begin at the first tick with any GPU");
  sub->add_option("--no-notice-fraction", rec.no_notice_fraction, "Fraction of the falls that come without notice (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--notice-s", rec.notice_s, "Preemption notice, s (default 120, AWS)")->check(non_negative_number());
  sub->add_option("--detection-s", rec.detection_s, "Noticing a node lost without notice, s (default 2, the heartbeat timeout)")
      ->check(non_negative_number());
  sub->add_option("--restart-s", rec.restart_s, "Our stop-and-start of a new plan, s (default 3, measured)")
      ->check(non_negative_number());
  sub->add_option("--baseline-restart-s", rec.baseline_restart_s, "A full restart of the baselines, s (default 3)")
      ->check(non_negative_number());
  sub->add_option("--planning-s", rec.planning_s, "Planning time per change, s (default: the planner's measured search time)")
      ->check(non_negative_number());
  sub->add_option("--transfer-gbps", rec.transfer_gbytes_per_s, "State moved or loaded per GPU, GB/s (default 1.25)")
      ->check(positive_number());
  sub->add_option("--checkpoint-interval-s", rec.checkpoint_interval_s, "Seconds of training between checkpoints (default 600)")
      ->check(positive_number());
  sub->add_flag("--live", opt->live, "Play a slice of the trace on local nodes while the job trains (replay_live.hpp)");
  add_live_replay_options(sub, opt->live_opt);
  sub->callback([&commands, opt] {
    commands.selected = [opt] {
      if (opt->live) {
        auto& live = opt->live_opt;
        live.traces = opt->spot.traces;
        live.cluster = opt->spot.cluster;
        live.model = opt->model;
        live.job = opt->spot.job;
        return run_live_replay(live);
      }
      if (wants_timeline(*opt)) {
        opt->spot.model = opt->model;
        opt->spot.sailor_data = opt->sailor_data;
        opt->spot.gbs = opt->gbs;
        return run_spot_replay(opt->spot);
      }
      if (opt->spot.traces.size() == 1) opt->trace = opt->spot.traces.front();
      return run_replay(*opt);
    };
  });
}

}  // namespace sailor::app
