// `sailor simulate`: iteration time, per-GPU memory and cost of one plan.
//
//   sailor simulate --sailor-data DIR --model OPT-350 --sailor-plan plan_config.json [--json]
//   sailor simulate --cluster C.yaml --model M.yaml --job J.yaml --plan P.yaml [--json]
//
// Inputs in Sailor's format use its profiles and network fits; inputs in ours use the cluster's
// links and prices, and Sailor's profiles too when --sailor-data is given (by the model's
// sailor_name). A plan that does not fit memory is a result (exit 0, "fits_memory": false);
// bad input is an error (exit 2, the message names what is missing; exit_codes.hpp).
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "model_inputs.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::simulator {

// Every field under its own name, in `sailor simulate --json`.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(memory_breakdown, parameters, gradients, optimizer_states,
                                   activations, communication_buffers, framework)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(stage_estimate, first_layer, end_layer, forward_s, backward_s,
                                   update_s, send_forward_s, send_backward_s, allreduce_s,
                                   micro_batches, slowest_replica, analytic)

}  // namespace sailor::simulator

namespace sailor::app {

namespace {

using json = nlohmann::json;

struct simulate_options {
  std::string sailor_data, model, sailor_plan, profile, quotas;
  std::string cluster, job, plan;
  std::string trace;
  std::string set;
  bool as_json = false;
};

int simulate_failed(const sailor::error& e) { return report_error("simulate", e); }

json memory_json(const simulator::memory_breakdown& m) {
  json j = m;
  j["total"] = m.total();
  return j;
}

json to_json(const simulator::estimate& e) {
  json stages = json::array();
  for (size_t s = 0; s < e.stages.size(); ++s) {
    json stage = e.stages[s];
    stage["stage"] = s;
    stages.push_back(std::move(stage));
  }
  json memory = json::array();
  for (const auto& m : e.memory) {
    memory.push_back({{"stage", m.stage},
                      {"replica", m.replica},
                      {"gpu_type", m.gpu_type},
                      {"zone", m.zone},
                      {"tp", m.tp},
                      {"bytes", memory_json(m.bytes)},
                      {"capacity_bytes", m.capacity_bytes},
                      {"sailor_check_bytes", m.sailor_check_bytes},
                      {"fits", m.fits()}});
  }
  json diloco = nullptr;  // null: the plan synchronises every iteration
  if (e.inner_iteration_s > 0)
    diloco = {{"inner_iteration_s", e.inner_iteration_s},
              {"outer_exchange_s", e.outer_exchange_s},
              {"outer_exposed_s_per_iteration", e.outer_exposed_s},
              {"outer_egress_usd_per_iteration", e.outer_egress_usd_per_iteration}};
  return {{"iteration_time_s", e.iteration_time_s},
          {"local_sgd", diloco},
          {"peak_memory_bytes", e.peak_memory_bytes},
          {"fits_memory", e.fits_memory},
          {"memory_verdict", e.memory_verdict},
          {"throughput_iters_per_s", e.throughput_iters_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"cost_per_iteration_usd", e.cost_per_iteration_usd},
          {"cost_per_hour_usd", e.cost_per_hour_usd},
          {"gpu_usd_per_hour", e.gpu_usd_per_hour},
          {"egress_usd_per_iteration", e.egress_usd_per_iteration},
          {"egress_bytes_per_iteration", e.egress_bytes_per_iteration},
          {"time_breakdown",
           {{"pipeline_s", e.pipeline_s},
            {"warmup_drain_s", e.warmup_drain_s},
            {"steady_s", e.steady_s},
            {"bottleneck_stage", e.bottleneck_stage},
            {"sync_and_update_s", e.sync_and_update_s}}},
          {"stages", stages},
          {"memory", memory},
          {"notes", e.notes}};
}

void print_human(const simulator::estimate& e, const simulator::event_result& ev) {
  std::printf("iteration time  %.4f s  (%.3f iterations/s, %.0f tokens/s)\n", e.iteration_time_s,
              e.throughput_iters_per_s, e.tokens_per_s);
  std::printf("  pipeline %.4f s = round trip %.4f s + steady %.4f s (bottleneck: stage %d); then sync+update %.4f s\n",
              e.pipeline_s, e.warmup_drain_s, e.steady_s, e.bottleneck_stage, e.sync_and_update_s);
  if (e.inner_iteration_s > 0)
    std::printf("  DiLoCo: inner iteration %.4f s (slowest region) + outer exchange %.4f s of which %.4f s per "
                "iteration is not hidden (its egress $%.5f per iteration)\n",
                e.inner_iteration_s, e.outer_exchange_s, e.outer_exposed_s, e.outer_egress_usd_per_iteration);
  std::printf("  event simulation: %.4f s (closed form differs by %+.3f%%)\n", ev.iteration_time_s,
              100.0 * (e.iteration_time_s - ev.iteration_time_s) / ev.iteration_time_s);
  std::printf("  %-6s %-9s %4s %9s %9s %9s %9s %9s %9s\n", "stage", "layers", "m", "fwd_ms", "bwd_ms", "send_f",
              "send_b", "allred", "update");
  for (size_t s = 0; s < e.stages.size(); ++s) {
    const auto& st = e.stages[s];
    char layers[32];
    std::snprintf(layers, sizeof layers, "%d..%d", st.first_layer, st.end_layer - 1);
    std::printf("  %-6zu %-9s %4d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f%s\n", s, layers, st.micro_batches,
                st.forward_s * 1e3, st.backward_s * 1e3, st.send_forward_s * 1e3, st.send_backward_s * 1e3,
                st.allreduce_s * 1e3, st.update_s * 1e3, st.analytic ? "  (analytic)" : "");
  }
  std::printf("peak memory     %.3f GB per GPU: %s\n", e.peak_memory_bytes / 1e9, e.memory_verdict.c_str());
  std::printf("  %-6s %-8s %-10s %-16s %3s %8s %8s %8s %8s %8s %8s %8s %8s\n", "stage", "replica", "gpu", "zone", "tp",
              "params", "grads", "optim", "activ", "buffers", "frame", "total", "of");
  int shown = 0;
  for (const auto& m : e.memory) {
    if (shown++ >= 32) {
      std::printf("  ... (%zu replicas in all; --json lists each)\n", e.memory.size());
      break;
    }
    std::printf("  %-6d %-8d %-10s %-16s %3d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f%s\n", m.stage, m.replica,
                m.gpu_type.c_str(), m.zone.c_str(), m.tp, m.bytes.parameters / 1e9, m.bytes.gradients / 1e9,
                m.bytes.optimizer_states / 1e9, m.bytes.activations / 1e9, m.bytes.communication_buffers / 1e9,
                m.bytes.framework / 1e9, m.bytes.total() / 1e9, m.capacity_bytes / 1e9, m.fits() ? "" : "  OUT OF MEMORY");
  }
  std::printf("cost            $%.4f per iteration, $%.2f per hour (GPUs $%.2f/h, egress $%.5f per iteration)\n",
              e.cost_per_iteration_usd, e.cost_per_hour_usd, e.gpu_usd_per_hour, e.egress_usd_per_iteration);
  for (const auto& n : e.notes) std::printf("note: %s\n", n.c_str());
}

// Inputs a plan file records (made_for) fill the options that were not given.
status fill_from_plan_file(simulate_options& opt) {
  if (opt.plan.empty()) return std::nullopt;
  auto origin = config::load_plan_origin(opt.plan);
  if (!origin) return origin.error();
  auto fill = [](std::string& option, const std::string& recorded) {
    if (option.empty()) option = recorded;
  };
  const bool own_pool = !opt.cluster.empty() || !opt.quotas.empty();
  fill(opt.model, origin->model);
  fill(opt.job, origin->job);
  fill(opt.sailor_data, origin->sailor_data);
  fill(opt.profile, origin->profile);
  if (!own_pool) {
    opt.cluster = origin->cluster;
    opt.quotas = origin->quotas;
  }
  if (opt.model.empty())
    return sailor::error::invalid_input(
      opt.plan, "--model",
      "is required: the plan file records no model (made_for.model); give --model");
  return std::nullopt;
}

// Everything the simulation reads besides the plan.
struct loaded_inputs {
  model_inputs model;
  std::optional<config::cluster> cluster;
};

status load_pool(const simulate_options& opt, loaded_inputs& loaded, simulator::sim_inputs& in) {
  auto& data = loaded.model.data;
  if (!opt.cluster.empty() && !opt.quotas.empty())
    return sailor::error::invalid_input("--quotas", "give --cluster or --quotas, not both");
  if (!opt.cluster.empty()) {
    auto c = config::load_cluster(opt.cluster);
    if (!c) return c.error();
    loaded.cluster = std::move(*c);
    in.cluster = &*loaded.cluster;
    // The cluster's links decide; Sailor's fits are used only without a cluster.
    in.network = nullptr;
    in.gpus = loaded.cluster->gpus;
  } else if (!opt.quotas.empty()) {
    if (!data)
      return sailor::error::invalid_input("--quotas", "needs --sailor-data DIR");
    auto q = config::load_sailor_quotas(opt.quotas);
    if (!q) return q.error();
    if (auto err = config::check_quotas(*q, *data, opt.quotas)) return err;
    loaded.cluster = config::cluster_from_quotas(*q, *data);
    in.cluster = &*loaded.cluster;  // zones and prices; Sailor's fits win for bandwidth
  }
  if (!in.cluster && !in.network)
    return sailor::error::invalid_input("",
                                        "no network: give --cluster C.yaml or --sailor-data DIR");
  return std::nullopt;
}

int run_simulate(simulate_options opt) {
  simulator::sim_options options;
  if (!opt.set.empty())
    if (auto err = simulator::set_options(options, opt.set)) return simulate_failed(*err);

  config::plan plan;
  config::job job;
  simulator::sim_inputs in;
  double measured_time = 0, measured_mem = 0;

  if (!opt.sailor_plan.empty() && !opt.plan.empty())
    return simulate_failed({error_kind::invalid_input, "give --sailor-plan or --plan, not both", "", 0, ""});
  if (opt.sailor_plan.empty() && opt.plan.empty())
    return simulate_failed({error_kind::invalid_input, "a plan is required: --sailor-plan PLAN.json or --plan P.yaml", "", 0, ""});
  if (auto err = fill_from_plan_file(opt)) return simulate_failed(*err);

  loaded_inputs loaded;
  auto inputs = load_model_inputs({opt.model, opt.sailor_data, opt.job, opt.profile});
  if (!inputs) return simulate_failed(inputs.error());
  loaded.model = std::move(*inputs);
  const auto& data = loaded.model.data;
  in.model = loaded.model.model;
  job = loaded.model.job;
  if (loaded.model.has_profile) in.profile = &loaded.model.profile;
  if (data) {
    in.gpus = data->gpus;
    in.network = &data->network;
  }
  in.job = job;
  if (auto err = load_pool(opt, loaded, in)) return simulate_failed(*err);

  if (!opt.sailor_plan.empty()) {
    auto p = config::load_sailor_plan(opt.sailor_plan);
    if (!p) return simulate_failed(p.error());
    plan = p->value;
    measured_time = p->measured_iteration_s;
    measured_mem = p->measured_peak_memory_bytes;
  } else {
    auto p = config::load_plan(opt.plan, in.model);
    if (!p) return simulate_failed(p.error());
    plan = *p;
  }
  if (plan.global_batch <= 0) plan.global_batch = job.global_batch;
  // A plan must fit the pool it is priced on: GPU types and zones it has, no more GPUs than
  // a zone holds.
  if (in.cluster)
    if (auto bad = config::validate_plan(plan, in.model, in.cluster, opt.plan.empty() ? opt.sailor_plan : opt.plan))
      return simulate_failed(*bad);

  auto ctx = simulator::sim_context::make(in, options);
  if (!ctx) return simulate_failed(ctx.error());
  auto est = simulator::simulate(*ctx, plan);
  if (!est) {
    auto e = est.error();
    if (e.file.empty()) e.file = opt.sailor_plan.empty() ? opt.plan : opt.sailor_plan;
    return simulate_failed(e);
  }
  auto ev = simulator::simulate_events(*ctx, plan);
  if (!ev) return simulate_failed(ev.error());
  if (!opt.trace.empty()) {
    std::ofstream out(opt.trace);
    if (!out) return simulate_failed({error_kind::failed, "cannot write the trace", opt.trace, 0, "--trace"});
    out << simulator::to_chrome_trace(*ev);
  }
  if (opt.as_json) {
    json j = to_json(*est);
    j["event_simulation"] = {{"iteration_time_s", ev->iteration_time_s},
                             {"closed_form_difference_percent",
                              100.0 * (est->iteration_time_s - ev->iteration_time_s) / ev->iteration_time_s}};
    if (measured_time > 0 || measured_mem > 0)
      j["measured"] = {{"iteration_time_s", measured_time}, {"peak_memory_bytes", measured_mem}};
    if (!opt.trace.empty()) j["trace"] = opt.trace;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_human(*est, *ev);
    if (measured_time > 0)
      std::printf("measured        %.4f s (error %+.2f%%), %.3f GB (error %+.2f%%)\n", measured_time,
                  100.0 * (est->iteration_time_s - measured_time) / measured_time, measured_mem / 1e9,
                  measured_mem > 0 ? 100.0 * (est->peak_memory_bytes - measured_mem) / measured_mem : 0.0);
    if (!opt.trace.empty()) std::printf("trace           %s (open in Perfetto or chrome://tracing)\n", opt.trace.c_str());
  }
  return 0;
}

}  // namespace

void add_simulate(CLI::App& app, command_set& commands) {
  auto opt = std::make_shared<simulate_options>();
  auto* sub = app.add_subcommand("simulate", "Predict iteration time, per-GPU memory and cost of a plan");
  sub->footer(
      "Sailor's format:  sailor simulate --sailor-data DIR --model OPT-350 --sailor-plan plan_config.json\n"
      "Ours:             sailor simulate --cluster C.yaml --model M.yaml --job J.yaml --plan P.yaml\n"
      "                  (add --sailor-data DIR to use Sailor's profiles for the model's sailor_name;\n"
      "                  GPU types without a profile use the catalog's peak FLOP/s x an efficiency)\n"
      "A plan that does not fit memory is reported (which GPU, by how much), exit 0.\n"
      "Simulator options (--set key=value,...): see `describe` in simulator.hpp.");
  sub->add_option("--sailor-data", opt->sailor_data, "A folder with the layout of a Sailor checkout");
  sub->add_option("--model", opt->model,
                  "A model YAML file, or a model's name (a shipped model file's name, or Sailor's with --sailor-data)");
  sub->add_option("--profile", opt->profile,
                  "A profile written by `sailor profile` (its GPU types replace Sailor's data's)");
  sub->add_option("--quotas", opt->quotas, "GPUs available, {gpu_type: {zone: count}} (with --sailor-data)");
  sub->add_option("--sailor-plan", opt->sailor_plan, "A plan in Sailor's plan_config JSON format");
  sub->add_option("--cluster", opt->cluster, "A cluster YAML file");
  sub->add_option("--job", opt->job, "A job YAML file");
  sub->add_option("--plan", opt->plan,
                  "A plan YAML file; the inputs it was made for (made_for) fill the options not given");
  sub->add_option("--trace", opt->trace, "Write the event simulation's timeline as Chrome trace JSON");
  sub->add_option("--set", opt->set, "Simulator options, key=value,... (e.g. overlap_p2p=1)");
  sub->add_flag("--json", opt->as_json, "Print one JSON object");
  sub->callback([&commands, opt] { commands.selected = [opt] { return run_simulate(*opt); }; });
}

}  // namespace sailor::app
