#include "sailor/config/profile.hpp"

#include "sailor/config/pools.hpp"

namespace sailor::config {

const std::vector<layer_time>* gpu_profile::find(int micro_batch, int tp) const {
  auto m = times.find(micro_batch);
  if (m == times.end()) return nullptr;
  auto t = m->second.find(tp);
  return t == m->second.end() ? nullptr : &t->second;
}

const gpu_profile* model_profile::find(const std::string& gpu_type) const {
  auto it = by_gpu.find(gpu_type);
  if (it != by_gpu.end()) return &it->second;
  // A spot or on-demand pool of a type runs as the type does (pools.hpp).
  const std::string base = pool_base_type(gpu_type);
  return base.empty() ? nullptr : find(base);
}

}  // namespace sailor::config
