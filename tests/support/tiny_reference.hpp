#pragma once
// The reference for training tests: the tiny model trained on one rank in this process, with
// the options `sailor demo` and `sailor coordinator --train-dir` give their training jobs.
// Needs LibTorch (include only from tests built with it).

#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sailor/train/executor.hpp>
#include <sailor/actors/node_training.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/config/load.hpp>

#include "local_job.hpp"

namespace sailor::testing {

// The loss curve of `iterations` iterations on one rank holding every layer.
// `model_file`: the tiny model's (configs/models/tiny.yaml) when empty.
inline std::vector<double> single_rank_losses(int micro_batch, int global_batch, int iterations,
                                              const std::string& model_file = "") {
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  auto model = sailor::config::load_model(model_file.empty() ? configs + "/models/tiny.yaml" : model_file);
  REQUIRE(model);
  auto job = sailor::config::load_job(configs + "/jobs/tiny.yaml");
  REQUIRE(job);
  sailor::config::plan p;
  p.micro_batch = micro_batch;
  p.global_batch = global_batch;
  sailor::config::stage_plan s;
  s.first_layer = 0;
  s.num_layers = model->num_all_layers();
  s.replicas = {sailor::config::replica{}};
  p.stages = {s};
  // The options the demo's training job asks for (same seed, optimizer, learning rate).
  sailor::actors::training_job tj;
  tj.seed = static_cast<std::uint64_t>(job->seed);
  tj.optimizer = job->optimizer == sailor::config::optimizer_kind::sgd ? "sgd" : "adamw";
  tj.torch_threads = 1;
  sailor::comm::gloo_options gopts;
  gopts.in_process_store = sailor::comm::make_in_process_store();
  auto factory = sailor::comm::make_gloo_factory(0, gopts);
  REQUIRE(factory);
  auto exec = sailor::train::stage_executor::create(*model, p, sailor::train::rank_role{}, **factory,
                                            sailor::train::options_for(tj));
  REQUIRE_MESSAGE(exec, (exec ? "" : exec.error().to_string()));
  std::vector<double> out;
  for (int it = 0; it < iterations; ++it) {
    auto tel = (*exec)->run_iteration(it);
    REQUIRE_MESSAGE(tel, (tel ? "" : tel.error().to_string()));
    out.push_back(tel->loss);
  }
  return out;
}

/// The loss curve in a `sailor demo`/`sailor train` summary is the single rank's for the
/// summary's plan's batch sizes.
inline void check_single_rank_curve(const nlohmann::json& summary, int iterations) {
  check_same_curve(summary["loss_curve"].get<std::vector<double>>(),
                   single_rank_losses(summary["plan"]["micro_batch"].get<int>(),
                                      summary["plan"]["global_batch"].get<int>(), iterations));
}

/// Every iteration a coordinator printed from `first` on has the single rank's loss for the
/// batch sizes it printed.
inline void check_printed_curve(const std::string& out, int iterations, int first = 1) {
  const auto [micro_batch, global_batch] = printed_batch(out);
  auto reference = single_rank_losses(micro_batch, global_batch, iterations);
  auto loss = printed_losses(out, iterations);
  for (int k = first; k <= iterations; ++k) {
    REQUIRE(loss.count(k));
    INFO("iteration " << k << ": run " << loss[k] << ", single rank " << reference[k - 1]);
    CHECK(std::abs(loss[k] - reference[k - 1]) <= 1e-4 * std::abs(reference[k - 1]));
  }
}

}  // namespace sailor::testing
