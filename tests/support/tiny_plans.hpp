#pragma once
// Plans and options of the training tests: the tiny model's 6 layers over stages of CPU
// replicas, micro-batch 2, global batch 8, seed 7.

#include <chrono>
#include <utility>
#include <vector>

#include <sailor/train/executor.hpp>
#include <sailor/config/plan.hpp>

namespace sailor::testing {

inline config::replica rep(int tp) {
  config::replica r;
  r.gpu_type = "cpu";
  r.tp = tp;
  return r;
}

inline config::stage_plan stage(int first, int count, std::vector<int> tps) {
  config::stage_plan s;
  s.first_layer = first;
  s.num_layers = count;
  for (int tp : tps) s.replicas.push_back(rep(tp));
  return s;
}

inline config::plan make_plan(std::vector<config::stage_plan> stages) {
  config::plan p;
  p.micro_batch = 2;
  p.global_batch = 8;
  p.stages = std::move(stages);
  return p;
}

inline train::train_options options_for(train::optimizer_kind kind) {
  train::train_options o;
  o.seed = 7;
  o.optimizer = kind;
  o.learning_rate = kind == train::optimizer_kind::adamw ? 3e-3 : 0.5;
  o.momentum = kind == train::optimizer_kind::sgd ? 0.9 : 0.0;
  o.weight_decay = 0.01;
  o.clip_norm = 1.0;
  o.torch_threads = 1;
  o.timeout = std::chrono::seconds{30};
  return o;
}

}  // namespace sailor::testing
