#include "search_space.hpp"

#include <algorithm>

namespace sailor::planner::detail {

int zone_set::rank_of(int zone) const {
  for (size_t i = 0; i < zones.size(); ++i)
    if (zones[i] == zone) return int(i);
  return int(zones.size());
}

search_space::search_space(const problem& prob, const tables& tab, const options& opts)
    : prob_(prob), tab_(tab), opts_(opts) {
  gpu_types_ = std::min<int>(int(tab.gpu_names().size()), max_gpu_types);
  for (const auto& z : prob.cluster.zones) {
    bool any = false;
    for (const auto& [g, n] : z.gpus)
      if (n > 0 && tab.gpu_index(g) >= 0) any = true;
    if (any) zone_names_.push_back(z.name);
  }
  available_.assign(size_t(gpu_types_), std::vector<int>(zone_names_.size(), 0));
  for (size_t zi = 0; zi < zone_names_.size(); ++zi) {
    const auto* z = prob.cluster.find_zone(zone_names_[zi]);
    for (const auto& [g, n] : z->gpus) {
      int gi = tab.gpu_index(g);
      if (gi >= 0 && gi < gpu_types_) available_[size_t(gi)][zi] += n;
    }
  }
  num_layers_ = tab.num_layers();
  global_batch_ = prob.job.global_batch;
  cost_goal_ = prob.job.goal == config::objective::min_cost;
  max_stages_ = opts.max_stages > 0 ? std::min(opts.max_stages, num_layers_) : num_layers_;
  max_stages_ = std::min(max_stages_, simulator::resolved_plan::max_stages);
}

int search_space::zone_index(const std::string& name) const {
  for (size_t i = 0; i < zone_names_.size(); ++i)
    if (zone_names_[i] == name) return int(i);
  return -1;
}

std::string search_space::region_of(int zone) const {
  const auto* z = prob_.cluster.find_zone(zone_names_[size_t(zone)]);
  return z ? z->region : zone_names_[size_t(zone)];
}

int search_space::zone_capacity(int zone) const {
  int n = 0;
  for (int g = 0; g < gpu_types_; ++g) n += available(g, zone);
  return n;
}

int search_space::micro_batches(int mbs, int replicas) const {
  int per_replica = (global_batch_ + replicas - 1) / replicas;
  return std::max(1, (per_replica + mbs - 1) / mbs);
}

int search_space::budget(const zone_set& zs, int gpu, int replicas) const {
  int cap_layers = num_layers_ * tab_.gpus_per_node(gpu);
  return std::min(zs.capacity[size_t(gpu)] / replicas, cap_layers);
}

}  // namespace sailor::planner::detail
