#include "sailor/config/profile.hpp"

namespace sailor::config {

const std::vector<layer_time>* gpu_profile::find(int micro_batch, int tp) const {
  auto m = times.find(micro_batch);
  if (m == times.end()) return nullptr;
  auto t = m->second.find(tp);
  return t == m->second.end() ? nullptr : &t->second;
}

const gpu_profile* model_profile::find(const std::string& gpu_type) const {
  auto it = by_gpu.find(gpu_type);
  return it == by_gpu.end() ? nullptr : &it->second;
}

}  // namespace sailor::config
