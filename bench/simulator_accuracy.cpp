// Simulator accuracy against measured plans, closed form vs event simulation, and the speed of
// one closed-form estimate.
//
//   simulator_accuracy [PLANS_DIR [SAILOR_DATA_ROOT [MODEL]]]
//
// PLANS_DIR is searched recursively for plan_config_*.json with measured "real" and "max_mem"
// (default: Sailor's GH200 validation plans). The model is taken from the folder names
// (OPT-350/...) unless given.
//
// Measured 2026-11-25 before and after one source of model shapes (GPT-Neo-2.7 with 20 heads
// and a tied head, OPT's block family, Llama without biases): every figure identical,
// iteration time mean |error| 3.13% worst 7.75%, peak memory 0.97% and 3.16% over 15 plans
// (llm_info's per-layer sizes stand in for the shape on these plans).
//
// Measured 2026-11-25 (load average 6-8) before and after sim_inputs::of and closed_form's
// for_each_replica_pair: every accuracy figure identical (3.13% / 7.75% time, 0.97% / 3.16%
// memory, closed form vs events 0.544%); one closed-form estimate 0.68-0.76 us.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sailor/config/sailor_format.hpp"
#include "sailor/config/shipped_models.hpp"
#include "sailor/simulator/simulator.hpp"

namespace fs = std::filesystem;
using namespace sailor;

namespace {

// The model a plan was measured on, from a folder of its path (OPT-350/, gpt_neo27/, ...):
// Sailor's name of a shipped model.
std::string model_from_path(const fs::path& p, const std::string& root) {
  const auto models = config::shipped_models();
  for (const auto& part : p)
    for (const auto& m : models)
      if (!m.shape.sailor_name.empty() &&
          config::normalized_name(part.string()) == config::normalized_name(m.shape.sailor_name))
        return m.shape.sailor_name;
  return "OPT-350";
}

// Errors (fractions) of every plan for every option set of a grid.
template <class Record, class Setter>
std::vector<std::vector<double>> grid_errors(const std::vector<Record>& records,
                                             const std::map<std::string, config::sailor_data>& data,
                                             const simulator::sim_options& base, int grid_size, Setter set,
                                             bool memory) {
  std::vector<std::vector<double>> err(grid_size, std::vector<double>(records.size(), NAN));
  for (int g = 0; g < grid_size; ++g) {
    simulator::sim_options o = base;
    set(o, g);
    std::map<std::string, simulator::sim_context> ctxs;
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      if (!ctxs.count(r.model)) {
        const auto& d = data.at(r.model);
        auto c = simulator::sim_context::make(simulator::sim_inputs::of(d), o);
        if (!c) continue;
        ctxs.emplace(r.model, std::move(*c));
      }
      auto e = simulator::simulate(ctxs.at(r.model), r.plan);
      const double truth = memory ? r.mem : r.real;
      if (!e || truth <= 0) continue;
      err[g][i] = ((memory ? e->peak_memory_bytes : e->iteration_time_s) - truth) / truth;
    }
  }
  return err;
}

// For each held-out set, picks the grid point with the least mean |error| on the rest and
// reports the held-out errors.
struct held_out_result {
  double mean = 0, worst = 0;
  int n = 0;
  int worst_index = -1;
};
held_out_result evaluate(const std::vector<std::vector<double>>& err, const std::vector<std::vector<int>>& folds) {
  held_out_result out;
  double sum = 0;
  for (const auto& test : folds) {
    int best = -1;
    double best_score = 1e300;
    for (size_t g = 0; g < err.size(); ++g) {
      double s = 0;
      int n = 0;
      for (size_t i = 0; i < err[g].size(); ++i) {
        if (std::find(test.begin(), test.end(), int(i)) != test.end() || std::isnan(err[g][i])) continue;
        s += std::abs(err[g][i]);
        ++n;
      }
      if (n > 0 && s / n < best_score) {
        best_score = s / n;
        best = int(g);
      }
    }
    if (best < 0) continue;
    for (int i : test) {
      if (std::isnan(err[best][i])) continue;
      sum += std::abs(err[best][i]);
      if (std::abs(err[best][i]) > out.worst) out.worst_index = i;
      out.worst = std::max(out.worst, std::abs(err[best][i]));
      ++out.n;
    }
  }
  out.mean = out.n ? sum / out.n : 0;
  return out;
}

template <class Record>
void cross_validate(const std::vector<Record>& records, const std::map<std::string, config::sailor_data>& data,
                    const simulator::sim_options& base) {
  if (records.size() < 3) return;
  // Time: the three fitted quantities (profiling overhead per layer, the ceiling of a GPU's
  // transfers inside a job (0: none), width of the profile smoothing over micro-batch sizes).
  const double overheads[] = {0, 50e-6, 100e-6, 150e-6, 200e-6, 250e-6};
  const double ceilings[] = {5, 6, 7, 8, 9, 10, 12, 15, 0};
  const double widths[] = {0, 1.0, 1.5, 2.0};
  auto time_err = grid_errors(records, data, base, 6 * 9 * 4, [&](simulator::sim_options& o, int g) {
    o.profile_layer_overhead_s = overheads[g / 36];
    o.job_gbytes_per_s_per_gpu = ceilings[(g / 4) % 9];
    o.profile_smoothing_octaves = widths[g % 4];
  }, false);
  // Memory: framework overhead and activation peak factor.
  const double frameworks[] = {3.0e9, 3.5e9, 4.0e9, 4.3e9, 4.6e9, 5.0e9};
  const double factors[] = {1.0, 1.05, 1.1, 1.12, 1.15, 1.2};
  auto mem_err = grid_errors(records, data, base, 6 * 6, [&](simulator::sim_options& o, int g) {
    o.framework_overhead_bytes = frameworks[g / 6];
    o.activation_peak_factor = factors[g % 6];
  }, true);
  std::vector<std::vector<int>> loo, large;
  std::vector<int> big;
  for (size_t i = 0; i < records.size(); ++i) {
    loo.push_back({int(i)});
    // plans of 16 or more nodes held out, fitted on the smaller ones
    if (records[i].plan.total_gpus() >= 64) big.push_back(int(i));
  }
  large.push_back(big);
  auto t1 = evaluate(time_err, loo), m1 = evaluate(mem_err, loo);
  std::printf("\nheld out (parameters refitted without the plans they are tested on):\n");
  std::printf("  leave-one-out:           time mean %.2f%% worst %.2f%%; memory mean %.2f%% worst %.2f%% (%d plans)\n",
              100 * t1.mean, 100 * t1.worst, 100 * m1.mean, 100 * m1.worst, t1.n);
  if (t1.worst_index >= 0)
    std::printf("    worst time held out: %s\n", fs::path(records[t1.worst_index].file).filename().c_str());
  if (!big.empty() && big.size() < records.size()) {
    auto t2 = evaluate(time_err, large), m2 = evaluate(mem_err, large);
    std::printf("  fit < 64 GPUs, test >= 64: time mean %.2f%% worst %.2f%%; memory mean %.2f%% worst %.2f%% (%d plans)\n",
                100 * t2.mean, 100 * t2.worst, 100 * m2.mean, 100 * m2.worst, t2.n);
  }
}


// Issue 13 item 2: pipelines of 3-4 stages of different consumer GPU types, one 8-GPU node per
// stage at TP 8 (the shape of the held-out measured plans the simulator over-predicted 2-4x),
// and the single-stage and data-parallel plans of the same nodes, which it predicted within 5%.
// "before": every TP rank of the receiver gets a full copy of the activation (8 copies through
// the node pair's one link: what the model charged until 2026-11-24, each of the 8 ranks a full
// copy at an eighth of the node pair's fit); "now": one copy, split over the TP ranks and
// gathered in the receiving node (DeepSpeed's partitioned send, on in Sailor's runs), at the
// node pair's fit of each side's own GPU count. Plans without a pipeline do not change.
void consumer_pipelines(const std::string& root, const simulator::sim_options& base) {
  auto d = config::load_sailor_data(root, "OPT-350");
  if (!d) return;
  const auto in = simulator::sim_inputs::of(*d);
  simulator::sim_options before = base;
  before.p2p_partitioned = false;
  auto now_ctx = simulator::sim_context::make(in, base);
  auto before_ctx = simulator::sim_context::make(in, before);
  if (!now_ctx || !before_ctx) return;
  const int L = now_ctx->num_layers();
  const std::vector<std::vector<std::vector<std::string>>> shapes = {
      {{"Titan-RTX"}, {"RTX-2080"}, {"RTX-3090"}},
      {{"RTX-3090"}, {"Titan-RTX"}, {"RTX-2080"}},
      {{"Titan-RTX"}, {"RTX-3090"}, {"RTX-2080"}, {"RTX-3090"}},
      {{"RTX-2080"}, {"Titan-RTX"}, {"RTX-3090"}, {"Titan-RTX"}},
      {{"Titan-RTX"}},
      {{"RTX-3090"}},
      {{"Titan-RTX", "RTX-3090"}},
      {{"Titan-RTX", "RTX-3090", "RTX-2080"}}};
  std::printf("\nconsumer GPUs, OPT-350, one 8-GPU node per replica at TP 8, us-central1-a, mbs 2, gbs 64 "
              "(issue 13 item 2; before = 8 full copies through the node pair's link):\n");
  std::printf("%-48s %10s %10s %8s | %10s %10s\n", "plan (stages: replica types)", "before_s", "now_s",
              "bef/now", "p2p_bef_ms", "p2p_now_ms");
  for (const auto& stages : shapes) {
    config::plan p;
    p.micro_batch = 2;
    p.global_batch = 64;
    std::string name;
    const int S = int(stages.size());
    for (int k = 0; k < S; ++k) {
      config::stage_plan st;
      st.first_layer = k * L / S;
      st.num_layers = (k + 1) * L / S - st.first_layer;
      for (const auto& t : stages[size_t(k)]) {
        st.replicas.push_back({t, "us-central1-a", 8, {}, {}});
        name += (name.empty() || name.back() == '|' ? "" : "+") + t;
      }
      if (k + 1 < S) name += "|";
      p.stages.push_back(st);
    }
    auto a = simulator::simulate(*before_ctx, p);
    auto b = simulator::simulate(*now_ctx, p);
    if (!a || !b) {
      std::printf("%-48s %s\n", name.c_str(), (!a ? a.error() : b.error()).to_string().c_str());
      continue;
    }
    double p2p_a = 0, p2p_b = 0;
    for (const auto& st : a->stages) p2p_a = std::max(p2p_a, st.send_forward_s);
    for (const auto& st : b->stages) p2p_b = std::max(p2p_b, st.send_forward_s);
    std::printf("%-48s %10.4f %10.4f %8.2f | %10.3f %10.3f\n", name.c_str(), a->iteration_time_s,
                b->iteration_time_s, a->iteration_time_s / b->iteration_time_s, p2p_a * 1e3, p2p_b * 1e3);
  }
}

}  // namespace

namespace {

// Sailor's data for `model` and the simulator context over it, kept by model name.
bool add_model(const std::string& data_root, const std::string& model,
               const simulator::sim_options& opts, std::map<std::string, config::sailor_data>& data,
               std::map<std::string, simulator::sim_context>& contexts) {
  auto d = config::load_sailor_data(data_root, model);
  if (!d) {
    std::fprintf(stderr, "%s\n", d.error().to_string().c_str());
    return false;
  }
  data.emplace(model, std::move(*d));
  const auto& dd = data.at(model);
  auto in = simulator::sim_inputs::of(dd);
  in.job.global_batch = dd.default_global_batch;
  auto ctx = simulator::sim_context::make(in, opts);
  if (!ctx) {
    std::fprintf(stderr, "%s\n", ctx.error().to_string().c_str());
    return false;
  }
  contexts.emplace(model, std::move(*ctx));
  return true;
}

// Time of one closed-form estimate of a resolved 4-stage plan, in thread CPU time: the
// machine may be shared, and waiting for a core is not our cost.
void time_closed_form(const simulator::sim_context& ctx, const simulator::resolved_plan& plan) {
  const int reps = 200000;
  volatile double sink = 0;
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  };
  const double start = cpu_now();
  for (int i = 0; i < reps; ++i) sink = sink + simulator::closed_form(ctx, plan).iteration_time_s;
  const double us = (cpu_now() - start) / reps;
  std::printf("closed form, 4-stage plan (%d replicas per stage): %.3f us per estimate (target: < 2 us)\n",
              plan.stages[0].num_replicas, us);
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

  struct record {
    std::string model;
    config::plan plan;
    double real = 0, mem = 0;
    std::string file;
  };
  std::vector<record> records;
  simulator::sim_options base_options;
  if (const char* env = std::getenv("SAILOR_SIM_OPTIONS")) {
    if (auto err = simulator::set_options(base_options, env)) {
      std::fprintf(stderr, "SAILOR_SIM_OPTIONS: %s\n", err->to_string().c_str());
      return 2;
    }
  }
  std::map<std::string, config::sailor_data> data;
  std::map<std::string, simulator::sim_context> contexts;
  double sum_t = 0, worst_t = 0, sum_m = 0, worst_m = 0, worst_ce = 0, sum_ms = 0, worst_ms = 0;
  int n_t = 0, n_m = 0, sailor_oom = 0, ours_oom = 0;
  std::printf("%-34s %9s %9s %7s | %8s %8s %7s | %9s %7s | %8s %7s\n", "plan", "real_s", "pred_s", "err%",
              "mem_GB", "pred_GB", "err%", "event_s", "cf-ev%", "Sailor_GB", "err%");
  simulator::resolved_plan four_stage;
  const simulator::sim_context* four_ctx = nullptr;
  for (const auto& f : files) {
    const std::string model = forced_model.empty() ? model_from_path(f, plans_dir) : forced_model;
    if (!contexts.count(model) && !add_model(data_root, model, base_options, data, contexts))
      return 1;
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
    // The second memory check (Sailor's planner's formula) as a prediction of the same peak.
    double sailor_gb = 0;
    for (const auto& g : est->memory) sailor_gb = std::max(sailor_gb, g.sailor_check_bytes / 1e9);
    const double ems = mem > 0 && sailor_gb > 0 ? 100.0 * (sailor_gb * 1e9 - mem) / mem : 0;
    if (mem > 0) {
      sum_m += std::abs(em);
      worst_m = std::max(worst_m, std::abs(em));
      sum_ms += std::abs(ems);
      worst_ms = std::max(worst_ms, std::abs(ems));
      ++n_m;
    }
    if (est->our_check_headroom_bytes < 0) ++ours_oom;
    if (est->sailor_check_headroom_bytes < 0) ++sailor_oom;
    worst_ce = std::max(worst_ce, std::abs(ce));
    std::string name = fs::relative(f, plans_dir).string();
    if (name.size() > 34) name = name.substr(name.size() - 34);
    std::printf("%-34s %9.4f %9.4f %+7.2f | %8.3f %8.3f %+7.2f | %9.4f %+7.3f | %8.3f %+7.2f\n", name.c_str(),
                real, est->iteration_time_s, et, mem / 1e9, est->peak_memory_bytes / 1e9, em, ev->iteration_time_s,
                ce, sailor_gb, ems);
    records.push_back({model, pf->value, real, mem, f.string()});
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
  std::printf("peak memory by Sailor's planner's formula (the second check): mean |error| %.2f%%, worst %.2f%%; "
              "plans that ran called out of memory: ours %d, Sailor's formula %d, of %d\n",
              n_m ? sum_ms / n_m : 0.0, worst_ms, ours_oom, sailor_oom, int(records.size()));

  cross_validate(records, data, base_options);
  consumer_pipelines(data_root, base_options);

  if (four_ctx) time_closed_form(*four_ctx, four_stage);
  return 0;
}
