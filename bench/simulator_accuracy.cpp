// Simulator accuracy against measured plans, closed form vs event simulation, and the speed of
// one closed-form estimate.
//
//   simulator_accuracy [PLANS_DIR [SAILOR_DATA_ROOT [MODEL]]]
//
// PLANS_DIR is searched recursively for plan_config_*.json with measured "real" and "max_mem"
// (default: Sailor's GH200 validation plans). The model is taken from the folder names
// (OPT-350/...) unless given.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sailor/config/sailor_format.hpp"
#include "sailor/simulator/simulator.hpp"

namespace fs = std::filesystem;
using namespace sailor;

namespace {

std::string model_from_path(const fs::path& p, const std::string& root) {
  for (const auto& part : p) {
    std::string s = part.string();
    for (const char* m : {"OPT-350", "GPT-Neo-2.7", "LLAMA-3-8", "OPT-30"})
      if (s == m) return s;
  }
  return "OPT-350";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string data_root = argc > 2 ? argv[2] : std::string(SAILOR_DATA_DIR) + "/sailor";
  const std::string plans_dir =
      argc > 1 ? argv[1] : data_root + "/sailor/Planner/simulations/validation";
  const std::string forced_model = argc > 3 ? argv[3] : "";

  std::vector<fs::path> files;
  if (!fs::is_directory(plans_dir)) {
    std::fprintf(stderr, "simulator_accuracy: %s is not a directory\n", plans_dir.c_str());
    return 2;
  }
  for (const auto& e : fs::recursive_directory_iterator(plans_dir))
    if (e.is_regular_file() && e.path().extension() == ".json" &&
        e.path().filename().string().rfind("plan_config", 0) == 0)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "simulator_accuracy: no plan_config_*.json under %s\n", plans_dir.c_str());
    return 2;
  }

  std::map<std::string, config::sailor_data> data;
  std::map<std::string, simulator::sim_context> contexts;
  double sum_t = 0, worst_t = 0, sum_m = 0, worst_m = 0, worst_ce = 0;
  int n_t = 0, n_m = 0;
  std::printf("%-34s %9s %9s %7s | %8s %8s %7s | %9s %7s\n", "plan", "real_s", "pred_s", "err%",
              "mem_GB", "pred_GB", "err%", "event_s", "cf-ev%");
  simulator::resolved_plan four_stage;
  const simulator::sim_context* four_ctx = nullptr;
  for (const auto& f : files) {
    const std::string model = forced_model.empty() ? model_from_path(f, plans_dir) : forced_model;
    if (!contexts.count(model)) {
      auto d = config::load_sailor_data(data_root, model);
      if (!d) {
        std::fprintf(stderr, "%s\n", d.error().to_string().c_str());
        return 1;
      }
      data.emplace(model, std::move(*d));
      const auto& dd = data.at(model);
      simulator::sim_inputs in;
      in.model = dd.model;
      in.profile = &dd.profile;
      in.gpus = dd.gpus;
      in.network = &dd.network;
      in.job.optimizer = dd.optimizer;
      in.job.global_batch = dd.default_global_batch;
      simulator::sim_options opts;
      if (const char* env = std::getenv("SAILOR_SIM_OPTIONS")) {
        if (auto err = simulator::set_options(opts, env)) {
          std::fprintf(stderr, "SAILOR_SIM_OPTIONS: %s\n", err->to_string().c_str());
          return 2;
        }
      }
      auto ctx = simulator::sim_context::make(in, opts);
      if (!ctx) {
        std::fprintf(stderr, "%s\n", ctx.error().to_string().c_str());
        return 1;
      }
      contexts.emplace(model, std::move(*ctx));
    }
    const auto& ctx = contexts.at(model);
    auto pf = config::load_sailor_plan(f.string());
    if (!pf) {
      std::fprintf(stderr, "%s\n", pf.error().to_string().c_str());
      continue;
    }
    auto est = simulator::simulate(ctx, pf->value);
    auto ev = simulator::simulate_events(ctx, pf->value);
    if (!est || !ev) {
      std::fprintf(stderr, "%s: %s\n", f.filename().c_str(),
                   (!est ? est.error() : ev.error()).to_string().c_str());
      continue;
    }
    const double real = pf->measured_iteration_s, mem = pf->measured_peak_memory_bytes;
    const double et = real > 0 ? 100.0 * (est->iteration_time_s - real) / real : 0;
    const double em = mem > 0 ? 100.0 * (est->peak_memory_bytes - mem) / mem : 0;
    const double ce = 100.0 * (est->iteration_time_s - ev->iteration_time_s) / ev->iteration_time_s;
    if (real > 0) {
      sum_t += std::abs(et);
      worst_t = std::max(worst_t, std::abs(et));
      ++n_t;
    }
    if (mem > 0) {
      sum_m += std::abs(em);
      worst_m = std::max(worst_m, std::abs(em));
      ++n_m;
    }
    worst_ce = std::max(worst_ce, std::abs(ce));
    std::string name = fs::relative(f, plans_dir).string();
    if (name.size() > 34) name = name.substr(name.size() - 34);
    std::printf("%-34s %9.4f %9.4f %+7.2f | %8.3f %8.3f %+7.2f | %9.4f %+7.3f\n", name.c_str(), real,
                est->iteration_time_s, et, mem / 1e9, est->peak_memory_bytes / 1e9, em,
                ev->iteration_time_s, ce);
    if (pf->value.num_stages() == 4 && !four_ctx) {
      auto rp = simulator::resolve(ctx, pf->value);
      if (rp) {
        four_stage = *rp;
        four_ctx = &ctx;
      }
    }
  }
  std::printf("\niteration time: mean |error| %.2f%%, worst %.2f%% over %d plans (target: < 5%%, < 10%%)\n",
              n_t ? sum_t / n_t : 0.0, worst_t, n_t);
  std::printf("peak memory:    mean |error| %.2f%%, worst %.2f%% over %d plans (target: < 5%%, < 10%%)\n",
              n_m ? sum_m / n_m : 0.0, worst_m, n_m);
  std::printf("closed form vs event simulation: worst difference %.3f%% (target: < 2%%)\n", worst_ce);

  if (four_ctx) {
    // Time of one closed-form estimate of a resolved 4-stage plan.
    const int reps = 200000;
    volatile double sink = 0;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) sink = sink + simulator::closed_form(*four_ctx, four_stage).iteration_time_s;
    auto end = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(end - start).count() / reps;
    std::printf("closed form, 4-stage plan (%d replicas per stage): %.3f us per estimate (target: < 2 us)\n",
                four_stage.stages[0].num_replicas, us);
  }
  return 0;
}
