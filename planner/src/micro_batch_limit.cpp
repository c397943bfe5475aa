#include "sailor/planner/micro_batch_limit.hpp"

#include <limits>

#include "tables.hpp"

namespace sailor::planner {

namespace {

// The least memory a GPU type needs for layer `l` at micro-batch `mbs`, over its TP degrees
// and recomputation; needed_bytes stays infinite when the type has no table at `mbs`.
micro_batch_limit least_need(const detail::tables& tab, int gpu, int mbs, int l, bool allow_rc) {
  micro_batch_limit best;
  best.needed_bytes = std::numeric_limits<double>::infinity();
  for (int tp : tab.tps(gpu, mbs)) {
    const detail::config_table* t = tab.find(gpu, tp, mbs);
    if (!t) continue;
    for (bool rc : {false, true}) {
      if (rc && !allow_rc) continue;
      const double need = tab.stage_memory(*t, l, l + 1, rc, 1);
      if (need < best.needed_bytes) {
        best.needed_bytes = need;
        best.tp = tp;
        best.recompute = rc;
      }
    }
  }
  best.gpu_type = tab.gpu_names()[size_t(gpu)];
  best.available_bytes = tab.memory_bytes(gpu);
  best.layer = l;
  return best;
}

// A layer that no GPU type holds at `mbs`, with the type closest to holding it (the smallest
// ratio of need to memory); nullopt when every layer fits some type.
std::optional<micro_batch_limit> layer_that_fits_nowhere(const detail::tables& tab, int mbs,
                                                         bool allow_rc) {
  for (int l = 0; l < tab.num_layers(); ++l) {
    std::optional<micro_batch_limit> closest;
    bool fits = false;
    for (int g = 0; g < int(tab.gpu_names().size()) && !fits; ++g) {
      auto need = least_need(tab, g, mbs, l, allow_rc);
      if (need.needed_bytes <= need.available_bytes) fits = true;
      else if (need.available_bytes > 0 &&
               (!closest || need.needed_bytes / need.available_bytes <
                              closest->needed_bytes / closest->available_bytes))
        closest = need;
    }
    if (!fits && closest) return closest;
  }
  return std::nullopt;
}

}  // namespace

result<std::optional<micro_batch_limit>> micro_batch_memory_limit(const problem& prob) {
  auto ctx = make_context(prob);
  if (!ctx) return ctx.error();
  const detail::tables tab(prob, *ctx);
  int largest = 0;
  for (int mbs : tab.micro_batches()) {
    // The search skips sizes that do not divide the global batch (search.cpp).
    if (prob.job.global_batch <= 0 || prob.job.global_batch % mbs != 0) continue;
    if (auto limit = layer_that_fits_nowhere(tab, mbs, prob.job.allow_recompute)) {
      limit->largest_fitting = largest;
      limit->excluded = mbs;
      return std::optional<micro_batch_limit>{std::move(*limit)};
    }
    largest = mbs;
  }
  return std::optional<micro_batch_limit>{};
}

}  // namespace sailor::planner
