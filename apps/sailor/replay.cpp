// `sailor replay`: an availability trace through the re-planner, one plan per step.
//
//   sailor replay --sailor-data DIR --model OPT-350 --trace gpu_trace_multizone.csv [--gbs N]
//
// The trace is Sailor's: one row per time step, one column per `GPU_zone` (GPUs available).
// Step 0 is planned from scratch; each later step re-plans from the previous plan.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::app {

namespace {

struct replay_options {
  std::string sailor_data, model, trace;
  int gbs = 0;
};

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
  sub->add_option("--sailor-data", opt->sailor_data, "A folder with the layout of a Sailor checkout");
  sub->add_option("--model", opt->model, "Sailor model name");
  sub->add_option("--trace", opt->trace, "Sailor's gpu_trace_*.csv: one row per step, one column per GPU_zone");
  sub->add_option("--gbs", opt->gbs, "Global batch size (default: the model's training config)");
  sub->callback([&commands, opt] { commands.selected = [opt] { return run_replay(*opt); }; });
}

}  // namespace sailor::app
