#pragma once
// Precomputed tables the search reads in its inner loop: per (GPU type, TP, micro-batch) prefix
// sums of per-layer times and sizes, so that a stage's time, memory and gradient bytes over any
// layer range cost O(1); and a network view that answers transfer times between endpoints.

#include <string>
#include <vector>

#include "sailor/planner/planner.hpp"

namespace sailor::planner::detail {

/// One (GPU type, TP, micro-batch): prefix sums over the model's layers (numbered as Sailor
/// numbers them: 0 embedding, 1..L blocks, L+1 head).
struct config_table {
  int gpu = 0;  ///< index into tables::gpu_names
  int tp = 1;
  int mbs = 1;
  std::vector<double> fwd, bwd, upd;  ///< prefix sums of seconds, size n+1

  double time(int a, int e, bool recompute) const {
    double f = fwd[e] - fwd[a];
    return f + (bwd[e] - bwd[a]) + (recompute ? f : 0.0);
  }
  double update(int a, int e) const { return upd[e] - upd[a]; }
};

class tables {
public:
  tables(const problem& prob, const simulator::sim_context& ctx);
  tables(const tables&) = delete;  // holds pointers into itself
  tables& operator=(const tables&) = delete;
  const simulator::sim_context& context() const { return ctx_; }
  /// The simulator's id of one of our GPU indices.
  int sim_gpu(int gpu) const { return sim_gpu_[gpu]; }

  int num_layers() const { return num_layers_; }
  const std::vector<std::string>& gpu_names() const { return gpu_names_; }
  int gpu_index(const std::string& name) const;  ///< -1 if unknown
  /// The table of (gpu, tp, mbs), or null when the profile lacks it.
  const config_table* find(int gpu, int tp, int mbs) const;
  /// Micro-batch sizes some GPU type was profiled at, ascending.
  const std::vector<int>& micro_batches() const { return micro_batches_; }
  /// TP degrees profiled for (gpu, mbs) that fit a node, ascending.
  const std::vector<int>& tps(int gpu, int mbs) const;

  double memory_bytes(int gpu) const { return memory_[gpu]; }
  int gpus_per_node(int gpu) const { return per_node_[gpu]; }
  double usd_per_gpu_s(int gpu) const { return usd_per_s_[gpu]; }

  /// Peak bytes of one GPU of a replica holding layers [a, e) with `in_flight` micro-batches of
  /// activations alive (1F1B: min(micro-batches, stages from this one to the last)).
  double stage_memory(const config_table& t, int a, int e, bool recompute, int in_flight) const;
  /// The same by our memory model alone (stage_memory is the larger of it and Sailor's
  /// formula's): where they differ, Sailor's formula is the one that binds.
  double stage_memory_ours(const config_table& t, int a, int e, bool recompute,
                           int in_flight) const;
  /// Bytes a stage ending at layer `e` (exclusive) sends the next per micro-batch.
  double boundary_bytes(int e, int mbs) const;
  /// Parameters (whole, not per GPU) of layers [a, e).
  double stage_params(int a, int e) const { return ctx_.params_per_gpu(1, a, e); }

private:
  const simulator::sim_context& ctx_;
  std::vector<int> sim_gpu_;
  int num_layers_ = 0;
  std::vector<std::string> gpu_names_;
  std::vector<double> memory_, usd_per_s_;
  std::vector<int> per_node_;
  std::vector<int> micro_batches_;
  std::vector<config_table> configs_;
  // Per (gpu, index of mbs in micro_batches_): the TPs of tps() and every profiled table.
  std::vector<std::vector<int>> tps_;
  std::vector<std::vector<const config_table*>> by_gpu_mbs_;
  int mbs_index(int mbs) const;
  std::vector<int> no_tps_;
};

/// Transfer times and egress prices between (zone, GPU type, GPUs used per node) endpoints.
class network {
public:
  explicit network(const simulator::sim_context& ctx) : ctx_(ctx) {}
  /// Seconds to move `bytes` from one endpoint to another (different nodes).
  double transfer_s(const std::string& za, const std::string& ga, int na, const std::string& zb,
                    const std::string& gb, int nb, double bytes) const;
  double egress_usd_per_gb(const std::string& za, const std::string& zb) const;

  /// Seconds of the gradient all-reduce of `params` parameters among `n` replicas of
  /// (zone, GPU type, TP) spread as given.
  double allreduce_s(const std::vector<simulator::endpoint>& reps, double params) const {
    return ctx_.allreduce_s(reps.data(), int(reps.size()), params);
  }
  simulator::endpoint endpoint_of(const std::string& zone, const std::string& gpu, int tp) const {
    return simulator::endpoint{ctx_.zone_id(zone), ctx_.gpu_id(gpu), tp};
  }

private:
  const simulator::sim_context& ctx_;
};

}  // namespace sailor::planner::detail
