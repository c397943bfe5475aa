// `sailor validate FILE...`: loads config files, reports the first error of each, and prints
// what a valid file holds. The kind of each file is told by --cluster/--model/--job/--plan or
// guessed from its top-level fields.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "commands.hpp"
#include "sailor/config/load.hpp"

namespace sailor::app {

namespace {

struct validate_options {
  std::vector<std::string> files;
  std::string cluster, model, job, plan;
};

// Guesses a file's kind from its top-level keys; empty when it cannot tell.
std::string guess_kind(const std::string& path) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) return "";
    if (root["stages"]) return "plan";
    if (root["zones"]) return "cluster";
    if (root["layers"] || root["hidden"]) return "model";
    if (root["global_batch"]) return "job";
  } catch (const YAML::Exception&) {
  }
  return "";
}

void print_model(const config::model_shape& m) {
  std::printf("  model %s: %d blocks (+ embedding and head = %d layers), hidden %d, %d heads, ffn %d, "
              "sequence %d, vocabulary %d, %s\n",
              m.name.c_str(), m.num_layers, m.num_all_layers(), m.hidden, m.heads, m.ffn(), m.sequence,
              m.vocabulary, config::to_string(m.precision));
  std::printf("  parameters: %.1f M (block %.2f M); forward of one block at micro-batch 1: %.2f GFLOP\n",
              m.total_params() / 1e6, m.params_of_block() / 1e6, m.forward_flops_of_layer(1, 1) / 1e9);
}

void print_cluster(const config::cluster& c) {
  long long gpus = 0;  // 64 bits, whatever a file holds
  for (const auto& z : c.zones)
    for (const auto& [type, n] : z.gpus) gpus += n;
  std::printf("  cluster %s: %zu regions, %zu zones, %lld GPUs, %s prices\n", c.name.c_str(), c.regions.size(),
              c.zones.size(), gpus, c.use_spot_prices ? "spot" : "on-demand");
  for (const auto& z : c.zones) {
    std::printf("    %-16s (%s):", z.name.c_str(), z.region.c_str());
    for (const auto& [type, n] : z.gpus) std::printf(" %d x %s ($%.2f/h)", n, type.c_str(), c.usd_per_gpu_hour(type));
    std::printf("\n");
  }
  for (const auto& l : c.links) {
    std::printf("    link %s <-> %s: %.2f ms, %.2f GB/s at 100 MB, $%.3f/GB\n", l.from.c_str(), l.to.c_str(),
                l.latency_s * 1e3, l.bytes_per_s(1e8) / 1e9, l.egress_usd_per_gb);
  }
}

void print_job(const config::job& j) {
  std::printf("  job: global batch %d, objective %s, optimizer %s", j.global_batch, config::to_string(j.goal),
              config::to_string(j.optimizer));
  if (j.limits.max_cost_per_iteration_usd) std::printf(", at most $%.3f/iteration", *j.limits.max_cost_per_iteration_usd);
  if (j.limits.min_iterations_per_s) std::printf(", at least %.3f iterations/s", *j.limits.min_iterations_per_s);
  if (j.limits.max_cost_per_hour_usd) std::printf(", at most $%.2f/hour", *j.limits.max_cost_per_hour_usd);
  std::printf("\n");
}

void print_plan(const config::plan& p) {
  std::printf("  plan: %d stages, micro-batch %d, global batch %d, %d GPUs\n", p.num_stages(), p.micro_batch,
              p.global_batch, p.total_gpus());
  for (int i = 0; i < p.num_stages(); ++i) {
    const auto& s = p.stages[i];
    std::printf("    stage %d: layers %d..%d, %zu replicas:", i, s.first_layer, s.end_layer() - 1, s.replicas.size());
    for (const auto& r : s.replicas) std::printf(" %s/%s/tp%d", r.gpu_type.c_str(), r.zone.c_str(), r.tp);
    std::printf("\n");
  }
}

int run_validate(const validate_options& opt) {
  struct item {
    std::string kind, path;
  };
  std::vector<item> items;
  if (!opt.cluster.empty()) items.push_back({"cluster", opt.cluster});
  if (!opt.model.empty()) items.push_back({"model", opt.model});
  if (!opt.job.empty()) items.push_back({"job", opt.job});
  for (const auto& f : opt.files) items.push_back({guess_kind(f), f});
  if (!opt.plan.empty()) items.push_back({"plan", opt.plan});
  if (items.empty()) {
    std::fprintf(stderr, "sailor validate: no files given (see --help)\n");
    return 2;
  }
  int failures = 0;
  std::optional<config::model_shape> model;
  std::optional<config::cluster> cluster;
  auto report = [&](const sailor::error& e) {
    std::fprintf(stderr, "error: %s\n", e.to_string().c_str());
    ++failures;
  };
  // Models and clusters first, so a plan can be checked against them.
  for (const auto& it : items) {
    if (it.kind == "model") {
      auto m = config::load_model(it.path);
      if (!m) { report(m.error()); continue; }
      std::printf("%s: ok\n", it.path.c_str());
      print_model(*m);
      model = *m;
    } else if (it.kind == "cluster") {
      auto c = config::load_cluster(it.path);
      if (!c) { report(c.error()); continue; }
      std::printf("%s: ok\n", it.path.c_str());
      print_cluster(*c);
      cluster = *c;
    }
  }
  for (const auto& it : items) {
    if (it.kind == "job") {
      auto j = config::load_job(it.path);
      if (!j) { report(j.error()); continue; }
      std::printf("%s: ok\n", it.path.c_str());
      print_job(*j);
    } else if (it.kind == "plan") {
      auto p = model ? config::load_plan(it.path, *model) : config::load_plan(it.path);
      if (!p) { report(p.error()); continue; }
      if (cluster) {
        if (auto bad = config::validate_plan(*p, model ? *model : config::model_shape{}, &*cluster, it.path)) {
          report(*bad);
          continue;
        }
      }
      std::printf("%s: ok%s\n", it.path.c_str(), model ? "" : " (not checked against a model: give --model)");
      print_plan(*p);
    } else if (it.kind.empty()) {
      report(sailor::error{error_kind::invalid_input,
                           "cannot tell what kind of config this is (no zones, layers, stages or global_batch "
                           "field, or not valid YAML); name it with --cluster, --model, --job or --plan",
                           it.path, 0, ""});
      // Loading it as each kind would give a more precise message; try the most likely.
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

void add_validate(CLI::App& app, command_set& commands) {
  auto opt = std::make_shared<validate_options>();
  auto* sub = app.add_subcommand("validate", "Check config files and print what they hold");
  sub->footer(
      "Each file's kind is guessed from its fields, or named with the options. A plan is checked\n"
      "against the model and cluster given with it (layers covered exactly once, known GPU types\n"
      "and zones, TP within a node). Exits 1 and names file, line and field on the first error of\n"
      "each file.\n\nExample: sailor validate configs/clusters/gcp-5-zones.yaml --model "
      "configs/models/opt-350m.yaml --plan configs/plans/opt-350m-2-stages.yaml");
  sub->add_option("files", opt->files, "Config files (cluster, model, job or plan)");
  sub->add_option("--cluster", opt->cluster, "A cluster file");
  sub->add_option("--model", opt->model, "A model file");
  sub->add_option("--job", opt->job, "A job file");
  sub->add_option("--plan", opt->plan, "A plan file");
  sub->callback([&commands, opt] { commands.selected = [opt] { return run_validate(*opt); }; });
}

}  // namespace sailor::app
