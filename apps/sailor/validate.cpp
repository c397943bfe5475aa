// `sailor validate FILE...`: loads config files, reports the first error of each, and prints
// what a valid file holds. The kind of each file is told by --cluster/--model/--job/--plan or
// guessed from its top-level fields.
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/text.hpp"

namespace sailor::app {

namespace {

struct validate_options {
  std::vector<std::string> files;
  std::string cluster, model, job, plan;
};

void print_model(const config::model_shape& m) {
  std::printf("  model %s: %d blocks (+ embedding and head = %d layers), hidden %d, %d heads, ffn %d, "
              "sequence %d, vocabulary %d, %s\n",
              m.name.c_str(), m.num_layers, m.num_all_layers(), m.hidden, m.heads, m.ffn(), m.sequence,
              m.vocabulary, config::to_string(m.precision));
  std::printf("  parameters: %.1f M (block %.2f M); forward of one block at micro-batch 1: %.2f GFLOP\n",
              m.total_params() / 1e6, m.params_of_block() / 1e6, m.forward_flops_of_layer(1, 1) / 1e9);
}

void print_cluster(const config::cluster& c) {
  std::printf("  cluster %s: %s, %s, %s, %s prices\n", c.name.c_str(),
              count_of(static_cast<long long>(c.regions.size()), "region").c_str(),
              count_of(static_cast<long long>(c.zones.size()), "zone").c_str(), count_of(c.total_gpus(), "GPU").c_str(),
              c.use_spot_prices ? "spot" : "on-demand");
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
  std::printf("  plan: %s, micro-batch %d, global batch %d, %s\n", count_of(p.num_stages(), "stage").c_str(),
              p.micro_batch, p.global_batch, count_of(p.total_gpus(), "GPU").c_str());
  for (int i = 0; i < p.num_stages(); ++i) {
    const auto& s = p.stages[i];
    std::printf("    stage %d: layers %d..%d, %s:", i, s.first_layer, s.end_layer() - 1,
                count_of(static_cast<long long>(s.replicas.size()), "replica").c_str());
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
  std::vector<sailor::error> unknown;  // files whose kind cannot be told (or that do not exist)
  for (const auto& f : opt.files) {
    auto kind = config::config_kind(f);
    if (kind) items.push_back({*kind, f});
    else unknown.push_back(kind.error());
  }
  if (!opt.plan.empty()) items.push_back({"plan", opt.plan});
  if (items.empty() && unknown.empty()) {
    std::fprintf(stderr, "sailor validate: no files given (see --help)\n");
    return exit_bad_input;
  }
  int failures = 0;
  std::optional<config::model_shape> model;
  std::optional<config::cluster> cluster;
  auto report = [&](const sailor::error& e) {
    std::fprintf(stderr, "error: %s\n", e.to_string().c_str());
    ++failures;
  };
  for (const auto& e : unknown) report(e);
  // A file that loaded is printed and its value kept; one that did not is reported.
  auto checked = [&](const std::string& path, auto loaded, auto print) {
    std::optional<std::decay_t<decltype(*loaded)>> out;
    if (!loaded) {
      report(loaded.error());
      return out;
    }
    std::printf("%s: ok\n", path.c_str());
    print(*loaded);
    out = std::move(*loaded);
    return out;
  };
  // Models and clusters first, so a plan can be checked against them.
  for (const auto& it : items) {
    if (it.kind == "model") {
      if (auto m = checked(it.path, config::load_model(it.path), print_model)) model = std::move(m);
    } else if (it.kind == "cluster") {
      if (auto c = checked(it.path, config::load_cluster(it.path), print_cluster)) cluster = std::move(c);
    }
  }
  for (const auto& it : items) {
    if (it.kind == "job") {
      checked(it.path, config::load_job(it.path), print_job);
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
    }
  }
  return failures == 0 ? exit_done : exit_bad_input;
}

}  // namespace

void add_validate(CLI::App& app, command_set& commands) {
  auto opt = std::make_shared<validate_options>();
  auto* sub = app.add_subcommand("validate", "Check config files and print what they hold");
  sub->footer(
      "Each file's kind is guessed from its fields, or named with the options. A plan is checked\n"
      "against the model and cluster given with it (layers covered exactly once, known GPU types\n"
      "and zones, TP within a node, no more GPUs in a zone than it has). Exits 2 and names file,\n"
      "line and field on the first error of each file.\n\nExample: sailor validate configs/clusters/gcp-5-zones.yaml --model "
      "configs/models/opt-350m.yaml --plan configs/plans/opt-350m-2-stages.yaml");
  sub->add_option("files", opt->files, "Config files (cluster, model, job or plan)");
  sub->add_option("--cluster", opt->cluster, "A cluster file");
  sub->add_option("--model", opt->model, "A model file");
  sub->add_option("--job", opt->job, "A job file");
  sub->add_option("--plan", opt->plan, "A plan file");
  sub->callback([&commands, opt] { commands.selected = [opt] { return run_validate(*opt); }; });
}

}  // namespace sailor::app
