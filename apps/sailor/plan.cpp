// `sailor plan`: the best plan for a job on a pool of GPUs.
//
//   sailor plan --cluster C.yaml --model M.yaml --job J.yaml [--sailor-data DIR] [--out PLAN.yaml]
//   sailor plan --sailor-data DIR --model OPT-350 --quotas QUOTAS.json --gbs 1024
//               --objective throughput|cost [--max-cost-per-iteration X] [--max-cost-per-hour X]
//               [--min-throughput Y] [--json] [--out PLAN.json]
//
// Exit codes as every subcommand (exit_codes.hpp): 0 with a plan; 2 on bad input (the message
// names the file and field); 1 when the job cannot be satisfied (the message names the
// constraint and by how much it fails).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "model_inputs.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/local_sgd.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/planner/micro_batch_limit.hpp"
#include "sailor/planner/planner.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::app {

namespace {

using json = nlohmann::json;

struct plan_options {
  std::string sailor_data, model, quotas, profile;
  std::string cluster, job;
  std::string out;
  std::string objective;
  int gbs = 0;
  double max_cost_per_iteration = 0, max_cost_per_hour = 0, min_throughput = 0;
  int max_micro_batch = 0;
  bool as_json = false;
  bool no_rerank_events = false;  ///< keep the closed form's ranking (re-ranking costs ~2% of a search)
};

bool ends_with(const std::string& s, const char* e) {
  std::string x(e);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

int plan_failed(const sailor::error& e) { return report_error("plan", e); }

// A row of the stage table: forward and backward of the slowest replica per micro-batch, its
// gradient sync, and the fullest replica's memory (zeros without a breakdown).
struct stage_row_values {
  double compute_s = 0, sync_s = 0, memory_bytes = 0, capacity_bytes = 0;
};

stage_row_values stage_row(const planner::estimate& d, int s) {
  stage_row_values out;
  if (s < static_cast<int>(d.stages.size())) {
    out.compute_s = d.stages[s].forward_s + d.stages[s].backward_s;
    out.sync_s = d.stages[s].allreduce_s;
  }
  if (const auto* g = d.fullest_replica(s)) out.memory_bytes = g->bytes.total(), out.capacity_bytes = g->capacity_bytes;
  return out;
}

int busiest_micro_batches(const planner::estimate& d) {
  int m = 0;
  for (const auto& st : d.stages) m = std::max(m, st.micro_batches);
  return m;
}

// The bottleneck with its time split as the table shows it: a stage's compute_ms is forward
// and backward only, the bottleneck's time of a stage also holds its p2p transfers.
void print_bottleneck(const planner::estimate& d) {
  const auto b = planner::bottleneck_of(d);
  const auto at = b.what.rfind("stage ");
  const int stage = at == std::string::npos ? -1 : std::atoi(b.what.c_str() + at + 6);
  const bool per_micro_batch = b.what.rfind("compute", 0) == 0 || b.what.rfind("p2p", 0) == 0;
  if (per_micro_batch && stage >= 0 && stage < static_cast<int>(d.stages.size())) {
    const double compute = d.stages[stage].forward_s + d.stages[stage].backward_s;
    std::printf("bottleneck: %s, %.2f ms per micro-batch (compute_ms %.2f + p2p transfers %.2f)\n", b.what.c_str(),
                b.seconds * 1e3, compute * 1e3, (b.seconds - compute) * 1e3);
  } else {
    std::printf("bottleneck: %s, %.2f ms per iteration\n", b.what.c_str(), b.seconds * 1e3);
  }
}

// How data-parallel replicas in different regions synchronise, and under DiLoCo what its
// exchange costs (closed form).
void print_local_sgd(const planner::estimate& d, const config::plan& p) {
  std::printf("data parallel across regions: %s\n", config::describe_local_sgd(p).c_str());
  if (!p.local_sgd) return;
  std::printf("  inner iteration %.4f s (slowest region); outer exchange %.4f s, %.4f s per iteration not "
              "hidden; its egress $%.5f per iteration\n",
              d.inner_iteration_s, d.outer_exchange_s, d.outer_exposed_s, d.outer_egress_usd_per_iteration);
}

json plan_local_sgd_json(const planner::estimate& d, const config::plan& p) {
  json j;
  j["mode"] = p.local_sgd ? "diloco" : "sync";
  j["description"] = config::describe_local_sgd(p);
  if (!p.local_sgd) return j;
  json regions = json::array();
  for (const auto& r : p.local_sgd->regions) regions.push_back({{"name", r.name}, {"zones", r.zones}});
  j["inner_steps"] = p.local_sgd->inner_steps;
  j["regions"] = regions;
  j["inner_iteration_s"] = d.inner_iteration_s;
  j["outer_exchange_s"] = d.outer_exchange_s;
  j["outer_exposed_s_per_iteration"] = d.outer_exposed_s;
  j["outer_egress_usd_per_iteration"] = d.outer_egress_usd_per_iteration;
  return j;
}

// Which limit kept the larger micro-batch sizes out of the search (GiB, as memory is sold).
std::string micro_batch_limit_line(const planner::micro_batch_limit& m) {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  char line[512];
  std::snprintf(line, sizeof line,
                "micro-batch: sizes up to %d considered; %d and larger do not fit: layer %d alone "
                "needs %.2f GiB on %s (TP %d%s), which has %.2f GiB",
                m.largest_fitting, m.excluded, m.layer, m.needed_bytes / gib, m.gpu_type.c_str(),
                m.tp, m.recompute ? ", recomputing" : "", m.available_bytes / gib);
  return line;
}

json micro_batch_limit_json(const std::optional<planner::micro_batch_limit>& m) {
  if (!m) return nullptr;
  return {{"largest_fitting", m->largest_fitting}, {"excluded", m->excluded},
          {"layer", m->layer},                     {"gpu_type", m->gpu_type},
          {"tp", m->tp},                           {"recompute", m->recompute},
          {"needed_bytes", m->needed_bytes},       {"available_bytes", m->available_bytes}};
}

void print_human(const planner::plan_result& r, const config::plan& p, double total_s) {
  const auto& d = r.detail;
  const auto& e = *p.estimate;
  std::printf("plan: %d stage%s, micro-batch %d, global batch %d, %d GPUs", p.num_stages(),
              p.num_stages() == 1 ? "" : "s", p.micro_batch, p.global_batch, p.total_gpus());
  std::string by_type;
  for (const auto& [g, n] : p.gpus_by_type()) by_type += (by_type.empty() ? " (" : ", ") + std::to_string(n) + " " + g;
  std::printf("%s)\n", by_type.empty() ? "" : (by_type + "").c_str());
  std::printf("  %-5s %-8s %-4s %-40s %10s %9s %14s\n", "stage", "layers", "rc", "replicas (count x type/TP @ zone)",
              "compute_ms", "sync_ms", "memory GB");
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& st = p.stages[s];
    std::string reps;
    for (size_t i = 0; i < st.replicas.size();) {
      size_t j = i;
      const auto& x = st.replicas[i];
      while (j < st.replicas.size() && st.replicas[j].gpu_type == x.gpu_type && st.replicas[j].zone == x.zone &&
             st.replicas[j].tp == x.tp)
        ++j;
      reps += (reps.empty() ? "" : ", ") + std::to_string(j - i) + "x" + x.gpu_type + "/tp" + std::to_string(x.tp) +
              "@" + x.zone;
      i = j;
    }
    char layers[32];
    std::snprintf(layers, sizeof layers, "%d..%d", st.first_layer, st.end_layer() - 1);
    const auto sr = stage_row(d, s);
    std::printf("  %-5d %-8s %-4s %-40s %10.2f %9.2f %6.2f of %5.2f\n", s, layers, st.recompute ? "yes" : "no",
                reps.c_str(), sr.compute_s * 1e3, sr.sync_s * 1e3, sr.memory_bytes / 1e9, sr.capacity_bytes / 1e9);
  }
  std::map<std::string, std::map<std::string, int>> per_zone;
  for (const auto& st : p.stages)
    for (const auto& x : st.replicas) per_zone[x.zone][x.gpu_type] += x.tp;
  std::printf("GPUs per zone:");
  for (const auto& [z, types] : per_zone) {
    std::printf("  %s:", z.c_str());
    for (const auto& [g, n] : types) std::printf(" %d %s", n, g.c_str());
  }
  std::printf("\n");
  std::string degrees;
  bool uniform = true;
  for (const auto& st : p.stages) {
    degrees += (degrees.empty() ? "" : "/") + std::to_string(st.replicas.size());
    uniform = uniform && st.replicas.size() == p.stages[0].replicas.size();
  }
  if (uniform) degrees = p.stages.empty() ? "0" : std::to_string(p.stages[0].replicas.size());
  std::printf("DP degree %s (replicas per stage%s), %d micro-batches per pipeline (busiest replica)\n",
              degrees.c_str(), uniform ? "" : ", stage by stage", busiest_micro_batches(d));
  std::printf("estimated iteration time %.4f s, throughput %.4f iterations/s\n", e.iteration_time_s,
              e.throughput_iters_per_s);
  std::printf("cost $%.4f per iteration, $%.2f per hour (egress $%.5f per iteration)\n", e.cost_per_iteration_usd,
              e.cost_per_hour_usd, d.egress_usd_per_iteration);
  print_local_sgd(d, p);
  print_bottleneck(d);
  std::printf("search %.1f ms (%d configurations, %lld partial pipelines); with reading inputs %.1f ms\n",
              r.search_s * 1e3, r.configurations, r.dp_states, total_s * 1e3);
}

// The planning problem from the options: model, pool, job, and flags over the job file.
status load_problem(const plan_options& opt, planner::problem& prob, model_inputs& inputs) {
  auto loaded = load_model_inputs({opt.model, opt.sailor_data, opt.job, opt.profile});
  if (!loaded) return loaded.error();
  inputs = std::move(*loaded);
  std::optional<config::sailor_data>& data = inputs.data;
  prob.model = inputs.model;
  prob.job = inputs.job;
  prob.profile = inputs.profile;
  if (!opt.cluster.empty()) {
    if (!opt.quotas.empty()) return sailor::error::invalid_input("--quotas", "give --cluster or --quotas, not both");
    auto c = config::load_cluster(opt.cluster);
    if (!c) return c.error();
    prob.cluster = std::move(*c);
  } else if (!opt.quotas.empty()) {
    if (!data) return sailor::error::invalid_input("--quotas", "needs --sailor-data DIR (for network fits and prices)");
    auto q = config::load_sailor_quotas(opt.quotas);
    if (!q) return q.error();
    int total = 0;
    for (const auto& [g, zones] : *q)
      for (const auto& [z, n] : zones) total += n;
    if (total == 0)
      return sailor::error::invalid_input(opt.quotas, "", "the quotas file lists no GPUs (expected {gpu_type: {zone: count}})");
    if (auto err = config::check_quotas(*q, *data, opt.quotas)) return err;
    prob.cluster = config::cluster_from_quotas(*q, *data);
    prob.network = data->network;
  } else {
    return sailor::error::invalid_input("--cluster", "a pool is required: --cluster C.yaml or --quotas QUOTAS.json");
  }
  // Flags override the job file (their ranges are checked by the parser).
  if (opt.gbs > 0) prob.job.global_batch = opt.gbs;
  if (!opt.objective.empty()) {
    if (opt.objective == "throughput") prob.job.goal = config::objective::max_throughput;
    else if (opt.objective == "cost" || opt.objective == "iteration_cost") prob.job.goal = config::objective::min_cost;
    else return sailor::error::invalid_input("--objective", "expected throughput or cost, got '" + opt.objective + "'");
  }
  if (opt.max_cost_per_iteration > 0) prob.job.limits.max_cost_per_iteration_usd = opt.max_cost_per_iteration;
  if (opt.max_cost_per_hour > 0) prob.job.limits.max_cost_per_hour_usd = opt.max_cost_per_hour;
  if (opt.min_throughput > 0) prob.job.limits.min_iterations_per_s = opt.min_throughput;
  if (opt.max_micro_batch > 0) prob.job.max_micro_batch = opt.max_micro_batch;
  if (prob.job.global_batch <= 0) return sailor::error::invalid_input("--gbs", "a global batch size is required (--gbs or the job file)");
  return std::nullopt;
}

std::string absolute(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// What the plan was made for, so that `simulate --plan` needs nothing else.
config::plan_origin origin_of(const plan_options& opt, const model_inputs& inputs) {
  config::plan_origin o;
  o.model = inputs.model_file.empty() ? opt.model : absolute(inputs.model_file);
  o.cluster = absolute(opt.cluster);
  o.job = absolute(opt.job);
  o.sailor_data = absolute(opt.sailor_data);
  o.quotas = absolute(opt.quotas);
  o.profile = absolute(opt.profile);
  return o;
}

void print_json(const planner::plan_result& r, const config::plan& p, double total_s, bool closed_form,
                const std::vector<std::string>& notes,
                const std::optional<planner::micro_batch_limit>& limit) {
  const auto& e = *p.estimate;
  json j;
  j["search_time_s"] = total_s;
  j["planner_search_s"] = r.search_s;
  j["iteration_time_s"] = e.iteration_time_s;
  j["estimate_from"] = closed_form ? "closed_form" : "events";
  j["closed_form_iteration_time_s"] = r.detail.iteration_time_s;
  j["throughput_iters_per_s"] = e.throughput_iters_per_s;
  j["cost_per_iteration_usd"] = e.cost_per_iteration_usd;
  j["cost_per_hour_usd"] = e.cost_per_hour_usd;
  j["gpus_used"] = p.gpus_by_type();
  j["num_stages"] = p.num_stages();
  j["micro_batch"] = p.micro_batch;
  j["bottleneck"] = planner::bottleneck_of(r.detail).what;
  j["configurations"] = r.configurations;
  j["dp_states"] = r.dp_states;
  j["notes"] = notes;
  j["egress_usd_per_iteration"] = r.detail.egress_usd_per_iteration;
  j["local_sgd"] = plan_local_sgd_json(r.detail, p);
  j["micro_batch_limit"] = micro_batch_limit_json(limit);  // null: no size excluded by memory
  j["plan"] = json::parse(config::to_sailor_plan_json(p));
  json stages = json::array();
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& st = p.stages[s];
    const auto sr = stage_row(r.detail, s);
    stages.push_back({{"first_layer", st.first_layer},
                      {"num_layers", st.num_layers},
                      {"recompute", st.recompute},
                      {"replicas", st.replicas.size()},
                      {"compute_per_micro_batch_s", sr.compute_s},
                      {"sync_s", sr.sync_s},
                      {"peak_memory_bytes", sr.memory_bytes},
                      {"memory_capacity_bytes", sr.capacity_bytes}});
  }
  j["stages"] = stages;
  std::printf("%s\n", j.dump(2).c_str());
}

int run_plan(const plan_options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  planner::problem prob;
  model_inputs inputs;
  if (auto err = load_problem(opt, prob, inputs)) return plan_failed(*err);

  planner::options popts;
  popts.rerank_with_events = !opt.no_rerank_events;
  auto r = planner::plan_job(prob, popts);
  if (!r) return plan_failed(r.error());
  config::plan p = r->plan;
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto notes = actors::estimate_notes(prob, p);
  auto limit = planner::micro_batch_memory_limit(prob);
  if (!limit) return plan_failed(limit.error());

  if (!opt.out.empty()) {
    std::ofstream out(opt.out);
    if (!out) return plan_failed({error_kind::failed, "cannot write the plan", opt.out, 0, "--out"});
    if (ends_with(opt.out, ".json")) {
      out << config::to_sailor_plan_json(p);
      if (p.local_sgd)
        std::fprintf(stderr, "sailor plan: warning: Sailor's plan format has no local_sgd: %s holds the plan "
                             "without DiLoCo (%s); write YAML to keep it\n",
                     opt.out.c_str(), config::describe_local_sgd(p).c_str());
    }
    else out << config::to_yaml(p) << config::to_yaml(origin_of(opt, inputs));
  }
  if (opt.as_json) {
    print_json(*r, p, total_s, opt.no_rerank_events, notes, *limit);
  } else {
    print_human(*r, p, total_s);
    std::printf("estimate from the %s (closed form: %.4f s per iteration)\n",
                opt.no_rerank_events ? "closed form" : "event-driven simulation of the best candidates",
                r->detail.iteration_time_s);
    if (*limit) std::printf("%s\n", micro_batch_limit_line(**limit).c_str());
    for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
    if (!opt.out.empty()) std::printf("written to %s\n", opt.out.c_str());
  }
  return 0;
}

}  // namespace

void add_plan(CLI::App& app, command_set& commands) {
  auto opt = std::make_shared<plan_options>();
  auto* sub = app.add_subcommand("plan", "Choose the best plan for a job on a pool of GPUs");
  sub->footer(
      "Ours:             sailor plan --cluster C.yaml --model M.yaml --job J.yaml [--out PLAN.yaml]\n"
      "                  (add --sailor-data DIR to use Sailor's profiles for the model's sailor_name)\n"
      "Sailor's format:  sailor plan --sailor-data DIR --model OPT-350 --quotas Q.json --gbs 1024\n"
      "                  --objective throughput|cost [--min-throughput Y] [--max-cost-per-iteration X] --json\n"
      "Exit 1 when no plan satisfies the job (the message names the constraint and by how much),\n"
      "2 on bad input. The plan file records the inputs it was made for (made_for), so that\n"
      "`sailor simulate --plan PLAN.yaml` needs no other option.");
  sub->add_option("--sailor-data", opt->sailor_data, "A folder with the layout of a Sailor checkout");
  sub->add_option("--model", opt->model,
                  "A model YAML file, or a model's name (a shipped model file's name, or Sailor's with --sailor-data)");
  sub->add_option("--quotas", opt->quotas, "GPUs available, {gpu_type: {zone: count}} (Sailor's format)");
  sub->add_option("--cluster", opt->cluster, "A cluster YAML file");
  sub->add_option("--job", opt->job, "A job YAML file");
  sub->add_option("--gbs", opt->gbs, "Global batch size (overrides the job file)")->check(positive_number());
  sub->add_option("--objective", opt->objective, "throughput or cost (overrides the job file)");
  sub->add_option("--max-cost-per-iteration", opt->max_cost_per_iteration, "Constraint, $ per iteration")
      ->check(positive_number());
  sub->add_option("--max-cost-per-hour", opt->max_cost_per_hour, "Constraint, $ per hour")->check(positive_number());
  sub->add_option("--min-throughput", opt->min_throughput, "Constraint, iterations per second")
      ->check(positive_number());
  sub->add_option("--max-micro-batch", opt->max_micro_batch, "Largest micro-batch size to consider")
      ->check(positive_number());
  sub->add_option("--profile", opt->profile,
                  "A profile written by `sailor profile` (its GPU types replace Sailor's data's)");
  sub->add_option("--out", opt->out, "Write the plan: YAML, or Sailor's plan_config when it ends in .json");
  sub->add_flag("--json", opt->as_json, "Print one JSON object");
  sub->add_flag("--no-rerank-events", opt->no_rerank_events,
                "Rank by the closed form only (default: the best candidates are re-ranked by the "
                "event-driven simulation, whose estimate is reported)");
  sub->callback([&commands, opt] { commands.selected = [opt] { return run_plan(*opt); }; });
}

}  // namespace sailor::app
