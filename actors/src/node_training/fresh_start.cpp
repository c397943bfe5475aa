#include "fresh_start.hpp"

#include <algorithm>

#include "sailor/actors/node_training.hpp"

namespace sailor::train {

train_options options_for(const actors::training_job& job) {
  train_options o;
  o.seed = job.seed;
  o.optimizer = job.optimizer == "sgd" ? optimizer_kind::sgd : optimizer_kind::adamw;
  set_schedule(o, job.schedule);
  if (!job.data.path.empty())
    o.data = job.data;
  o.eval_batches = std::max(1, job.eval_batches);
  o.torch_threads = job.torch_threads;
  o.timeout = std::chrono::milliseconds{job.timeout_ms};
  o.links = job.links;
  // checkpoint_every 0: none written (the folder still names the state kept in memory).
  o.checkpoint_dir = job.checkpoint_every > 0 ? job.checkpoint_dir : std::string{};
  o.checkpoint_every = std::max(1, job.checkpoint_every);
  o.checkpoint_final = job.iterations;
  o.outer = job.outer;
  return o;
}

bool starts_from_pretrained(const actors::training_job& job) {
  return job.start_iteration == 0 && !job.init_from.empty();
}

status load_init_from(const actors::training_job& job, stage_executor& exec) {
  if (auto err = exec.load_pretrained(job.init_from)) {
    auto e = *err;
    e.message = "loading init_from: " + e.message;
    return e;
  }
  return {};
}

std::optional<result<actors::train_report>> initial_validation(const actors::training_job& job,
                                                               const actors::train_report& base,
                                                               stage_executor& exec) {
  if (!starts_from_pretrained(job) || job.eval_every <= 0)
    return std::nullopt;
  auto val = exec.validation_loss();
  if (!val)
    return result<actors::train_report>{val.error()};
  auto r = base;
  r.kind = static_cast<std::int32_t>(actors::report_kind::reached);
  r.phase = actors::initial_validation_phase;
  r.iteration = 0;
  r.has_val_loss = true;
  r.val_loss = *val;
  return result<actors::train_report>{r};
}

}  // namespace sailor::train
