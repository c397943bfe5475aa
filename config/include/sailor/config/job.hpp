#pragma once
/// What the user asks of a training job: batch, objective and constraints.

#include <optional>
#include <string>

namespace sailor::config {

enum class objective { max_throughput, min_cost };
const char* to_string(objective o);

enum class optimizer_kind { adamw, adam, sgd };
const char* to_string(optimizer_kind o);

struct constraints {
  std::optional<double> max_cost_per_iteration_usd;
  std::optional<double> min_iterations_per_s;
  std::optional<double> max_cost_per_hour_usd;
};

struct job {
  int global_batch = 0;  ///< sequences per iteration
  objective goal = objective::max_throughput;
  constraints limits;
  optimizer_kind optimizer = optimizer_kind::adamw;
  bool mixed_precision = true;  ///< fp16/bf16 weights with fp32 master weights and states
  bool allow_recompute = true;  ///< the planner may choose activation recomputation
  int max_micro_batch = 0;      ///< 0: no limit beyond memory
  int seed = 1234;
  int iterations = 0;           ///< 0: run until stopped
};

}  // namespace sailor::config
