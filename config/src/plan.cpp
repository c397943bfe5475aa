#include "sailor/config/plan.hpp"

#include <algorithm>

namespace sailor::config {

int plan::micro_batches_per_replica(int stage) const {
  const auto& s = stages.at(stage);
  int replicas = std::max<int>(1, static_cast<int>(s.replicas.size()));
  int per_replica = global_batch / replicas;
  return std::max(1, per_replica / std::max(1, micro_batch));
}

int local_sgd_plan::region_of(const std::string& zone) const {
  for (std::size_t i = 0; i < regions.size(); ++i)
    if (std::find(regions[i].zones.begin(), regions[i].zones.end(), zone) != regions[i].zones.end())
      return static_cast<int>(i);
  return -1;
}

int plan::total_gpus() const {
  int n = 0;
  for (const auto& s : stages)
    for (const auto& r : s.replicas) n += r.tp;
  return n;
}

std::map<std::string, int> plan::gpus_by_type() const {
  std::map<std::string, int> out;
  for (const auto& s : stages)
    for (const auto& r : s.replicas) out[r.gpu_type] += r.tp;
  return out;
}

}  // namespace sailor::config
