#include "training_setup.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "sailor/train/checkpoint.hpp"
#include "sailor/simulator/simulator.hpp"

#if defined(SAILOR_WITH_TRAIN)
#include "sailor/train/executor.hpp"
#include "sailor/train/pretrained.hpp"
#include "sailor/config/log.hpp"
#include "sailor/models/token_data.hpp"
#endif

namespace sailor::app {

namespace fs = std::filesystem;

std::string memory_refusal(const config::model_shape& model, const config::plan& plan,
                           const config::cluster& cluster, const config::job& job) {
  simulator::sim_inputs in;
  in.model = model;
  in.gpus = cluster.gpus;
  in.cluster = &cluster;
  in.job = job;
  // CPU devices: no CUDA context or NCCL buffers.
  simulator::sim_options options;
  options.framework_overhead_bytes = 0;
  options.overlap_p2p = true;
  if (auto ctx = simulator::sim_context::make(in, options)) {
    if (auto est = simulator::simulate(*ctx, plan))
      return est->fits_memory ? "" : est->memory_verdict;
  }
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    double params = 0;
    const auto& st = plan.stages[s];
    for (int l = st.first_layer; l < st.end_layer(); ++l)
      params += static_cast<double>(model.params_of_layer(l));
    for (const auto& r : st.replicas) {
      const auto* gpu = cluster.gpus.find(r.gpu_type);
      const double capacity = gpu ? static_cast<double>(gpu->memory_bytes) : 0;
      const double bytes = 16 * params / std::max(1, r.tp);
      if (capacity > 0 && bytes > capacity) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "stage %zu needs at least %.2f GiB per %s (weights, gradients, optimizer "
                      "states) but one has %.2f GiB",
                      s, bytes / (1 << 30), r.gpu_type.c_str(), capacity / (1 << 30));
        return buf;
      }
    }
  }
  return {};
}

status cost_refusal(const config::model_shape& model, const config::plan& plan,
                    const config::cluster& cluster, const config::job& job, double iteration_s) {
  const auto& limits = job.limits;
  if (!limits.max_cost_per_iteration_usd && !limits.max_cost_per_hour_usd)
    return {};
  simulator::sim_inputs in;
  in.model = model;
  in.gpus = cluster.gpus;
  in.cluster = &cluster;
  in.job = job;
  auto ctx = simulator::sim_context::make(in, simulator::sim_options{});
  if (!ctx)
    return {};
  auto est = simulator::simulate(*ctx, plan);
  if (!est)
    return {};
  const double seconds = iteration_s > 0 ? iteration_s : est->iteration_time_s;
  const double per_iteration = est->gpu_usd_per_hour * seconds / 3600 + est->egress_usd_per_iteration;
  const double per_hour = seconds > 0 ? per_iteration * 3600 / seconds : 0;
  char buf[320];
  if (limits.max_cost_per_iteration_usd && per_iteration > *limits.max_cost_per_iteration_usd * (1 + 1e-9)) {
    std::snprintf(buf, sizeof buf, "the plan costs $%.6g per iteration (%.4g s at $%.4g/h of devices, "
                  "$%.4g of egress), over job.constraints.max_cost_per_iteration_usd ($%.6g): "
                  "no plan over these nodes was found that meets it", per_iteration, seconds, est->gpu_usd_per_hour,
                  est->egress_usd_per_iteration, *limits.max_cost_per_iteration_usd);
    return sailor::error::infeasible("job.constraints.max_cost_per_iteration_usd", buf);
  }
  if (limits.max_cost_per_hour_usd && per_hour > *limits.max_cost_per_hour_usd * (1 + 1e-9)) {
    std::snprintf(buf, sizeof buf, "the plan costs $%.6g per hour, over "
                  "job.constraints.max_cost_per_hour_usd ($%.6g): no plan over these nodes was "
                  "found that meets it", per_hour, *limits.max_cost_per_hour_usd);
    return sailor::error::infeasible("job.constraints.max_cost_per_hour_usd", buf);
  }
  return {};
}

std::string job_key(const training_settings& s) {
  // FNV-1a: stable across processes and builds, unlike std::hash.
  std::uint64_t h = 1469598103934665603ull;
  for (char c : fs::absolute(s.work_dir).lexically_normal().string() + "|" + s.model.name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

#if defined(SAILOR_WITH_TRAIN)
namespace {
// The job's init_from read whole against the model, as every rank will read its slice.
status check_init_from(const config::model_shape& model, const config::job& job,
                              const std::string& job_file) {
  if (job.init_from.empty())
    return {};
  auto log = log::get("train");
  log->info("checking {} against model {} (init_from)", job.init_from, model.name);
  auto found = train::check_pretrained(model, job.init_from);
  if (!found) {
    auto e = found.error();
    e.message = "init_from: " + e.message;
    if (e.file.empty())
      e.file = job_file;
    return e;
  }
  log->info("{}: {} tensors ({:.1f} MB) fill every parameter of {}", job.init_from,
            found->tensors, static_cast<double>(found->bytes) / 1e6, model.name);
  if (!found->unused.empty())
    log->warn("{}: {} tensors of the file fill no parameter of {} and are not used (first: {})",
              job.init_from, found->unused.size(), model.name, found->unused.front());
  return {};
}
}  // namespace
#endif

status check_training_inputs(const config::model_shape& model, const config::job& job,
                             const std::string& job_file) {
#if defined(SAILOR_WITH_TRAIN)
  if (auto st = train::validate_architecture(model))
    return st;
  if (auto st = check_init_from(model, job, job_file))
    return st;
  if (!job.data)
    return {};
  auto data = models::token_dataset::open(*job.data, model.vocabulary, model.sequence);
  if (!data)
    return data.error();
  if (job.eval_every > 0 && (*data)->tokens(models::data_split::validation) <= model.sequence)
    return sailor::error{error_kind::invalid_input,
                         "eval_every " + std::to_string(job.eval_every) +
                           " needs a validation part of at least " +
                           std::to_string(model.sequence + 1) + " tokens, but data " +
                           job.data->path + " holds out " +
                           std::to_string((*data)->tokens(models::data_split::validation)) +
                           " (data.validation_fraction)",
                         job_file, 0, "eval_every"};
#else
  (void)model;
  if (!job.init_from.empty())
    return sailor::error{error_kind::invalid_input,
                         "this build has no LibTorch: it cannot load " + job.init_from,
                         job_file, 0, "init_from"};
  if (job.data)
    return sailor::error{error_kind::invalid_input,
                         "this build has no LibTorch: it cannot train on data " + job.data->path,
                         job_file, 0, "data"};
#endif
  return {};
}

// A path of the job file as the nodes read it: the nodes of `sailor train` share this machine
// but not the working directory's meaning, so they get the path the coordinator checked, made
// absolute (as written when that fails).
static std::string node_path(const std::string& path) {
  std::error_code ec;
  auto absolute = fs::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

void fill_job_settings(actors::training_job& tj, const config::job& job) {
  tj.seed = static_cast<std::uint64_t>(job.seed);
  tj.optimizer = job.optimizer == config::optimizer_kind::sgd ? "sgd" : "adamw";
  tj.schedule = job.schedule;
  tj.eval_every = job.eval_every;
  tj.eval_batches = job.eval_batches;
  tj.data = {};
  if (job.data) {
    tj.data = *job.data;
    tj.data.path = node_path(job.data->path);
  }
  tj.init_from = job.init_from.empty() ? std::string{} : node_path(job.init_from);
  tj.outer = job.data_parallel;
}

bool fill_training_job(actors::training_job& tj, const training_settings& s,
                       const actors::checkpoint_holdings& held) {
  tj.model = s.model;
  tj.iterations = s.iterations;
  fill_job_settings(tj, s.job);
  tj.torch_threads = s.torch_threads;
  tj.timeout_ms = s.timeout_ms;
  tj.links = s.links;
  // The estimate the plan was chosen with, when its planner made one (0: none, and no
  // prediction is printed rather than "predicted 0").
  if (tj.plan.estimate && tj.plan.estimate->iteration_time_s > 0)
    tj.predicted_iteration_s = tj.plan.estimate->iteration_time_s;
  {
    // The newest checkpoint the nodes still in the job hold (they report their shards), in
    // folders relative to each node's state folder (sailor-node --state-dir).
    // Scoped by the job (its train folder and model), so that shards a node kept from another
    // job in the same state folder are never resumed from. Without checkpoints on disk
    // (checkpoint_every 0: the ranks write none) a plan still resumes from the state the ranks
    // of the last one keep in memory (checkpoints/<job>/mem), and from nothing else.
    const std::string mine = "checkpoints/" + job_key(s) + "/";
    // A coordinator that continues a job prefers state no newer than its journal's
    // iterations (journal_bound); newer state only when there is no other (the iterations
    // between have no loss on record then, but are not run again).
    const std::string under = s.checkpoint_every > 0 ? mine : mine + "mem";
    const int bound = s.journal_bound ? s.journal_bound->load() : -1;
    auto from = held.newest(under, bound >= 0 ? bound + 1 : 0);
    if (from.iterations == 0 && bound >= 0)
      from = held.newest(under);
    tj.start_iteration = std::min(from.iterations, s.iterations);
    if (from.iterations > 0) {
      tj.restore_dir = from.folder;
      tj.restore_files = from.files;
      tj.restore_holders = from.holders;
    }
    tj.checkpoint_dir = mine + "v" + std::to_string(tj.plan_version);
    tj.checkpoint_every = s.checkpoint_every;
    // The folders a plan may still restore from: this one's checkpoint and, should it turn
    // out corrupt or gone, the next older complete one. The nodes remove the job's others.
    tj.keep_checkpoint_dirs.push_back(tj.checkpoint_dir);
    if (from.iterations > 0) {
      tj.keep_checkpoint_dirs.push_back(from.folder);
      if (from.mixed)  // the checkpoint that holds the layers memory lacks
        tj.keep_checkpoint_dirs.push_back(from.other_folder);
      if (auto older = held.newest(mine, from.iterations); older.iterations > 0)
        tj.keep_checkpoint_dirs.push_back(older.folder);
    }
  }
  return tj.start_iteration < tj.iterations;
}

}  // namespace sailor::app
