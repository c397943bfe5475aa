#pragma once
// What every part of the search reads: the pool of GPUs with names resolved to indices (GPU
// types as `tables` numbers them, zones that hold any of them), the GPUs available per (type,
// zone), and the job's figures the search keeps asking for. Built once per search.

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tables.hpp"

namespace sailor::planner::detail {

/// GPU types the search tells apart (a pool with more uses the first this many).
constexpr int max_gpu_types = 8;
constexpr double infinity = std::numeric_limits<double>::infinity();

/// GPUs per type, as the dynamic program counts what one pipeline uses.
using gpu_use = std::array<std::int16_t, max_gpu_types>;

/// One stage of a pipeline template: layers [first, end), GPU type (index), TP, recomputation.
struct stage_shape {
  int first, end, gpu, tp;
  bool recompute;
};
/// A pipeline template: its stages in order. Placement gives it zones and replicas.
using pipeline_shape = std::vector<stage_shape>;

/// Zones searched together: in placement order (most GPUs first), with their GPUs per type.
struct zone_set {
  std::vector<int> zones;
  std::vector<int> capacity;  ///< per GPU type, summed over the zones
  /// A zone's position in the placement order (the number of zones when not in the set).
  int rank_of(int zone) const;
};

class search_space {
public:
  search_space(const problem& prob, const tables& tab, const options& opts);

  const problem& prob() const { return prob_; }
  const tables& tab() const { return tab_; }
  const options& opts() const { return opts_; }

  int gpu_types() const { return gpu_types_; }
  int num_layers() const { return num_layers_; }
  int global_batch() const { return global_batch_; }
  /// Stages a pipeline may have: the options' limit, the layers, the simulator's limit.
  int max_stages() const { return max_stages_; }
  bool cost_goal() const { return cost_goal_; }

  int num_zones() const { return int(zone_names_.size()); }
  const std::string& zone_name(int zone) const { return zone_names_[size_t(zone)]; }
  /// -1 when the pool has no such zone.
  int zone_index(const std::string& name) const;
  /// The zone's region (the zone's own name when the cluster does not say).
  std::string region_of(int zone) const;
  int available(int gpu, int zone) const { return available_[size_t(gpu)][size_t(zone)]; }
  /// GPUs of every type in the zone.
  int zone_capacity(int zone) const;

  /// Micro-batches of the busiest of `replicas` replicas at micro-batch `mbs`, as the simulator
  /// counts them: ceil(ceil(global batch / replicas) / mbs).
  int micro_batches(int mbs, int replicas) const;
  /// GPUs of type `gpu` one of `replicas` pipelines may use on zone set `zs`: an equal share of
  /// the set's GPUs, at most a node's worth per layer.
  int budget(const zone_set& zs, int gpu, int replicas) const;

private:
  const problem& prob_;
  const tables& tab_;
  const options& opts_;
  int gpu_types_ = 0, num_layers_ = 0, global_batch_ = 0, max_stages_ = 0;
  bool cost_goal_ = false;
  std::vector<std::string> zone_names_;
  std::vector<std::vector<int>> available_;  // [type][zone]
};

}  // namespace sailor::planner::detail
