#include "pareto.hpp"

#include <algorithm>

namespace sailor::planner::detail {

bool dominates(const partial_pipeline& a, const partial_pipeline& b, int gpu_types) {
  if (a.stages > b.stages || a.max_t > b.max_t || a.sum_t > b.sum_t || a.tail > b.tail) return false;
  constexpr double tie = 0.98;
  bool le = true, strict = a.stages < b.stages || a.max_t < tie * b.max_t || a.sum_t < tie * b.sum_t ||
                           a.tail < tie * b.tail;
  for (int g = 0; g < gpu_types && le; ++g) le = a.use[size_t(g)] <= b.use[size_t(g)], strict = strict || a.use[size_t(g)] < b.use[size_t(g)];
  return le && strict;
}

void pareto_sets::reset(int num_layers) {
  pool_.clear();
  sets_.assign(size_t(num_layers) + 1, {0, 0});
  pool_.push_back(partial_pipeline{});
  sets_[size_t(num_layers)] = {0, 1};
}

const partial_pipeline& pareto_sets::nth(const std::vector<partial_pipeline>& candidates, size_t i) {
  // Candidates are large and the beam usually stops long before their end, so they are sorted
  // lazily: a prefix at a time (nth_element, then a sort of the prefix), which yields the
  // order a full sort would (the order is total: the creation index breaks every tie).
  auto less = [](const sort_key& a, const sort_key& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.stages != b.stages) return a.stages < b.stages;
    if (a.option != b.option) return a.option < b.option;
    if (a.end != b.end) return a.end < b.end;
    return a.index < b.index;
  };
  if (i >= sorted_upto_) {
    size_t upto = std::min(order_.size(), std::max<size_t>({i + 1, 2 * sorted_upto_, 16}));
    auto first = order_.begin() + long(sorted_upto_), mid = order_.begin() + long(upto);
    if (mid != order_.end()) std::nth_element(first, mid, order_.end(), less);
    std::sort(first, mid, less);
    sorted_upto_ = upto;
  }
  return candidates[size_t(order_[i].index)];
}

bool pareto_sets::dominated(const partial_pipeline& p, int first, int gpu_types) const {
  for (int k = first; k < int(pool_.size()); ++k)
    if (dominates(pool_[size_t(k)], p, gpu_types)) return true;
  return false;
}

void pareto_sets::keep_best(int boundary, const std::vector<partial_pipeline>& candidates, int beam_width,
                            int gpu_types) {
  order_.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    order_.push_back({c.rank, c.stages, c.option, c.end, int(i)});
  }
  sorted_upto_ = 0;
  const int first = int(pool_.size());
  int kept = 0;
  // First the best partial pipeline of each GPU use (so that cheap ones survive when faster,
  // hungrier ones would fill the beam), then the best of the rest.
  taken_.assign(candidates.size(), 0);
  seen_.clear();
  for (size_t i = 0; i < candidates.size() && kept < beam_width; ++i) {
    const auto& p = nth(candidates, i);
    if (std::find(seen_.begin(), seen_.end(), p.use) != seen_.end()) continue;
    seen_.push_back(p.use);
    taken_[i] = 1;
    if (dominated(p, first, gpu_types)) continue;
    pool_.push_back(p);
    ++kept;
  }
  const int limit = 2 * beam_width;
  for (size_t i = 0; i < candidates.size() && kept < limit; ++i) {
    if (taken_[i]) continue;
    const auto& p = nth(candidates, i);
    if (dominated(p, first, gpu_types)) continue;
    pool_.push_back(p);
    ++kept;
  }
  sets_[size_t(boundary)] = {first, first + kept};
}

}  // namespace sailor::planner::detail
