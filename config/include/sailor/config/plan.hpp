#pragma once
/// A plan: the one value that flows through the planner, simulator, supervisor and stage actors.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sailor::config {

/// One data-parallel copy of a stage: `tp` GPUs of one type in one zone.
struct replica {
  std::string gpu_type;
  std::string zone;
  int tp = 1;
  std::vector<std::string> nodes;  ///< node ids, filled when roles are assigned
  std::vector<int> devices;        ///< device indices on those nodes (tp of them)
};

/// A pipeline stage: a contiguous range of layers (numbered as in model.hpp) and its replicas.
struct stage_plan {
  int first_layer = 0;
  int num_layers = 0;
  bool recompute = false;  ///< activation recomputation
  std::vector<replica> replicas;

  int end_layer() const { return first_layer + num_layers; }
};

/// What the plan was chosen with (filled by the simulator or planner).
struct plan_estimate {
  double iteration_time_s = 0;
  double throughput_iters_per_s = 0;
  double cost_per_iteration_usd = 0;
  double cost_per_hour_usd = 0;
  double peak_memory_bytes = 0;
  /// Where the times do not come from a profile: the simulator's notes (the catalog's peak
  /// FLOP/s and the efficiency assumed). Empty: profiled. Kept in the process that planned
  /// (not in plan files nor on the wire).
  std::vector<std::string> notes;
};

/// DiLoCo across regions (local SGD; the job's data_parallel block holds its optimizer): the
/// replicas inside each region synchronise their gradients every iteration; the regions run
/// `inner_steps` iterations apart, then average their parameters' change (the pseudo-gradient)
/// and take the outer optimizer's step. Every replica's zone is in exactly one region, and a
/// micro-batch's path through the stages stays inside one region.
struct local_sgd_plan {
  struct region {
    std::string name;
    std::vector<std::string> zones;
  };
  int inner_steps = 0;
  std::vector<region> regions;

  /// The index of the region holding `zone`; -1 when none does.
  int region_of(const std::string& zone) const;
};

struct plan {
  int micro_batch = 1;
  int global_batch = 0;
  std::vector<stage_plan> stages;
  std::optional<plan_estimate> estimate;
  /// Set: regions joined by DiLoCo. Unset: one synchronous data-parallel step every iteration.
  std::optional<local_sgd_plan> local_sgd;

  int num_stages() const { return static_cast<int>(stages.size()); }
  /// Micro-batches per iteration per pipeline: global batch over (micro batch x replicas of
  /// stage 0). With replica counts differing between stages, each stage splits the global
  /// batch over its own replicas.
  int micro_batches_per_replica(int stage) const;
  int total_gpus() const;
  std::map<std::string, int> gpus_by_type() const;
};

}  // namespace sailor::config
