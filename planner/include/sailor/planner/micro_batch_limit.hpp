#pragma once
/// Which micro-batch sizes device memory rules out, and why: what `sailor plan` tells when
/// the search never considered the larger sizes the profiles have.

#include <optional>
#include <string>

#include "sailor/config/error.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::planner {

/// The smallest micro-batch size that no GPU of the pool can hold, and the limit it hit.
///
/// A size is held when every layer fits some GPU type of the pool as the search's most
/// lenient stage would hold it: a stage of that one layer, last in its pipeline (one
/// micro-batch of activations alive), at the TP degree and recomputation that need the least.
/// A size that fails this can be in no plan; the search never chooses it.
struct micro_batch_limit {
  int largest_fitting = 0;  ///< the largest smaller size that fits (0: none does)
  int excluded = 0;         ///< the smallest size that does not fit
  int layer = 0;            ///< a layer no GPU type can hold at `excluded` (Sailor's numbering)
  std::string gpu_type;     ///< the GPU type that comes closest to holding it
  int tp = 1;
  bool recompute = false;
  double needed_bytes = 0;     ///< what that GPU type needs for the layer at `excluded`
  double available_bytes = 0;  ///< what one GPU of that type has
};

/// Among the micro-batch sizes the search considers for `prob` (profiled, at most the job's
/// max_micro_batch, dividing the global batch): the first one memory excludes, or nullopt when
/// every one fits. Fails when the problem does not resolve (as plan_job would).
result<std::optional<micro_batch_limit>> micro_batch_memory_limit(const problem& prob);

}  // namespace sailor::planner
