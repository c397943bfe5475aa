#pragma once
// The dynamic program over layers, for one (zone set, micro-batch, data-parallel degree): from
// the last layer back, every partial pipeline kept at a later boundary is extended by one more
// stage (a layer range on one GPU type at one TP, recomputing only where it would not fit
// otherwise), and a bounded Pareto set of the results is kept per boundary (pareto.hpp).
//
// A stage's time and memory over any layer range are O(1) from the tables' prefix sums; its
// gradient sync is the whole model's all-reduce among the D replicas (laid out as stage-major
// placement would lay them: zones filled in order) scaled by its share of the parameters.

#include <unordered_map>
#include <vector>

#include "pareto.hpp"
#include "search.hpp"
#include "search_space.hpp"

namespace sailor::planner::detail {

/// One way to run a stage in a configuration: GPU type and TP, with the costs its placement
/// implies.
struct stage_option {
  const config_table* table;
  int gpu;
  int tp;
  double sync_full_s;  ///< all-reduce of the whole model's gradients among the D replicas
  double send_s;       ///< one activation to a neighbour stage
  int budget;          ///< GPUs of its type one pipeline may use when stages of this TP use them
};

/// A complete pipeline the program kept, with the program's estimate of its objective (what
/// it pruned by; placement only adds cross-zone sends and egress).
struct pipeline_found {
  pipeline_shape shape;
  double rank = 0;
};

class stage_program {
public:
  stage_program(const search_space& space, const network& net);

  /// The ways to run a stage at micro-batch `mbs` with `replicas` replicas on zone set `zs`,
  /// each type within its budget per pipeline (`budgets`).
  std::vector<stage_option> stage_options(const zone_set& zs, int mbs, int replicas,
                                          const std::array<int, max_gpu_types>& budgets) const;

  /// The complete pipelines kept at layer 0, best first: the program run over `opts` at
  /// micro-batch `mbs` with `replicas` replicas. Partial pipelines whose time (or, for minimum
  /// cost, dollars) cannot beat `threshold` are not kept.
  std::vector<pipeline_found> run(const std::vector<stage_option>& opts, int mbs, int replicas,
                                  double threshold, search_stats& stats);

private:
  /// The gradient all-reduce of `params` over `ring`; when the job lets plans run DiLoCo
  /// across regions, its slowest region's alone where that is faster.
  double ring_sync_s(const std::vector<simulator::endpoint>& ring, double params) const;
  struct limits {
    double usd_cap_per_s = infinity;  // on D * pipeline GPU dollars per second
    double time_cap = infinity;       // from the throughput floor
    bool need_usd = false;
  };
  // The candidates at boundary `first`: every kept pipeline at a later boundary, extended by a
  // stage [first, e) of every option.
  void extend(int first, const std::vector<stage_option>& opts, int m, int replicas, double threshold);
  // tables::stage_memory for one or two micro-batches in flight, remembered per table: the
  // program asks the same (table, layer range) in every configuration that uses the table.
  std::vector<double>& memory_memo(const config_table& tb);
  double memory(std::vector<double>& memo, const config_table& tb, int a, int e, bool recompute,
                int in_flight) const;
  pipeline_shape shape_of(int index, const std::vector<stage_option>& opts) const;

  const search_space& space_;
  const network& net_;
  limits limits_;
  pareto_sets sets_;
  std::vector<partial_pipeline> candidates_;
  std::unordered_map<const config_table*, std::vector<double>> memory_memo_;
};

}  // namespace sailor::planner::detail
