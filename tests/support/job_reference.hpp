#pragma once
// The reference for tests of whole jobs: a model trained by a job file on one rank in this
// process, with the options the job file gives (train::options_from: seed, schedule, data,
// validation batches), and the validation pass after the iterations the nodes run it after
// (every eval_every-th and the last). Needs LibTorch (include only from tests built with it).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <sailor/train/executor.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/config/load.hpp>

namespace sailor::testing {

struct job_curves {
  std::vector<double> loss;
  std::vector<std::pair<std::int64_t, double>> validation;  ///< [iterations done, loss]
};

inline job_curves single_rank_job(const sailor::config::model_shape& model,
                                  const sailor::config::job& job, int micro_batch,
                                  int global_batch, int iterations) {
  sailor::config::plan p;
  p.micro_batch = micro_batch;
  p.global_batch = global_batch;
  sailor::config::stage_plan s;
  s.first_layer = 0;
  s.num_layers = model.num_all_layers();
  s.replicas = {sailor::config::replica{}};
  p.stages = {s};
  sailor::comm::gloo_options gopts;
  gopts.in_process_store = sailor::comm::make_in_process_store();
  auto factory = sailor::comm::make_gloo_factory(0, gopts);
  REQUIRE(factory);
  auto exec = sailor::train::stage_executor::create(model, p, sailor::train::rank_role{}, **factory,
                                                    sailor::train::options_from(job));
  REQUIRE_MESSAGE(exec, (exec ? "" : exec.error().to_string()));
  job_curves out;
  for (int it = 0; it < iterations; ++it) {
    auto tel = (*exec)->run_iteration(it);
    REQUIRE_MESSAGE(tel, (tel ? "" : tel.error().to_string()));
    out.loss.push_back(tel->loss);
    if (job.eval_every > 0 && ((it + 1) % job.eval_every == 0 || it + 1 == iterations)) {
      auto v = (*exec)->validation_loss();
      REQUIRE_MESSAGE(v, (v ? "" : v.error().to_string()));
      out.validation.emplace_back(it + 1, *v);
    }
  }
  return out;
}

}  // namespace sailor::testing
