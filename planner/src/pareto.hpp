#pragma once
// The dynamic program's state: per layer boundary, a bounded Pareto set of partial pipelines
// (the stages from that boundary to the end of the model).

#include <utility>
#include <vector>

#include "search_space.hpp"

namespace sailor::planner::detail {

/// The stages from a layer boundary to the end of the model, as the program keeps them: the
/// first stage here, the rest by the index of the partial pipeline it continues with.
struct partial_pipeline {
  gpu_use use{};              ///< GPUs per type one pipeline uses
  std::int16_t stages = 0;    ///< stages from this boundary to the end
  std::int16_t end = 0;       ///< end layer of the first stage
  std::int16_t option = -1;   ///< how the first stage runs (index into the program's options)
  bool recompute = false;     ///< whether the first stage recomputes activations
  int rest = -1;              ///< the partial pipeline after the first stage (-1: none)
  double max_t = 0;           ///< slowest stage's time per micro-batch (with its sends)
  double sum_t = 0;           ///< sum of the stages' times per micro-batch
  double tail = 0;            ///< slowest gradient sync and optimizer step after the pipeline
  double key = 0;             ///< partial iteration time: (m - 1) max_t + sum_t + tail
  double rank = 0;            ///< what the sets keep the best of (time, or cost)
};

/// Whether `a` makes `b` useless: no more stages, GPUs of any type, time or tail, and fewer of
/// one of them. Near ties (within 2%) count as ties, and ties are kept: permutations of equal
/// stages place differently on zones, which the program does not see.
bool dominates(const partial_pipeline& a, const partial_pipeline& b, int gpu_types);

/// For every layer boundary a set of partial pipelines of which none dominates another, at
/// most twice the beam width, all in one pool (a pipeline names the one it continues with).
class pareto_sets {
public:
  /// Empty sets at boundaries 0..num_layers - 1, and the empty pipeline at num_layers.
  void reset(int num_layers);
  /// Indices [first, last) of the set at `boundary`.
  std::pair<int, int> range(int boundary) const { return sets_[size_t(boundary)]; }
  const partial_pipeline& operator[](int index) const { return pool_[size_t(index)]; }
  /// Fills the set at `boundary` from `candidates` (pipelines starting there) taken in order
  /// of rank (ties: fewer stages, lower option, lower end, earlier candidate): first the best
  /// of each GPU use, up to `beam_width` of them, then the best of the rest, up to twice
  /// `beam_width` in all; each only when none kept before at this boundary dominates it.
  void keep_best(int boundary, const std::vector<partial_pipeline>& candidates, int beam_width,
                 int gpu_types);

private:
  struct sort_key {
    double rank;
    int stages, option, end, index;
  };
  // The candidate of rank i; the order is sorted a prefix at a time, as far as asked.
  const partial_pipeline& nth(const std::vector<partial_pipeline>& candidates, size_t i);
  bool dominated(const partial_pipeline& p, int first, int gpu_types) const;

  std::vector<partial_pipeline> pool_;
  std::vector<std::pair<int, int>> sets_;
  // Scratch of keep_best, reused from call to call.
  std::vector<sort_key> order_;
  size_t sorted_upto_ = 0;
  std::vector<char> taken_;
  std::vector<gpu_use> seen_;
};

}  // namespace sailor::planner::detail
