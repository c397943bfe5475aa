#include "live_slow_nodes.hpp"

#include <algorithm>
#include <cmath>

#include "sailor/simulator/correction.hpp"

namespace sailor::app {

slowed_nodes::slowed_nodes(const std::map<std::string, double>& factors,
                           const std::vector<actors::node_inventory>& nodes) {
  for (const auto& n : nodes) {
    auto it = factors.find(n.name);
    if (it == factors.end() || !std::isfinite(it->second) || it->second <= 1 || n.gpu_type.empty())
      continue;
    real_type_[n.name] = n.gpu_type;
    factor_[n.name] = it->second;
  }
}

std::string slowed_nodes::type_of(const std::string& node) const {
  auto it = real_type_.find(node);
  if (it == real_type_.end())
    return {};
  return simulator::slowed_type_name(it->second, factor_.at(node));
}

void slowed_nodes::rename(std::vector<actors::node_inventory>& nodes) const {
  for (auto& n : nodes)
    if (auto type = type_of(n.name); !type.empty())
      n.gpu_type = type;
}

void slowed_nodes::add_to(config::gpu_catalog& catalog) const {
  for (const auto& [node, type] : real_type_)
    simulator::add_slowed_type(type, factor_.at(node), catalog, nullptr);
}

void slowed_nodes::add_to(config::model_profile& profile) const {
  // The catalog is only a vehicle here: the profile's entry is what this adds.
  config::gpu_catalog scratch;
  for (const auto& [node, type] : real_type_) {
    config::gpu_spec base;
    base.name = type;
    scratch.upsert(base);
    simulator::add_slowed_type(type, factor_.at(node), scratch, &profile);
  }
}

void slowed_nodes::restore(config::plan& p) const {
  for (auto& stage : p.stages)
    for (auto& r : stage.replicas)
      if (auto base = simulator::slowed_base_type(r.gpu_type); !base.empty())
        r.gpu_type = base;
}

bool plan_uses(const config::plan& p, const std::string& node) {
  for (const auto& stage : p.stages)
    for (const auto& r : stage.replicas)
      if (std::find(r.nodes.begin(), r.nodes.end(), node) != r.nodes.end())
        return true;
  return false;
}

}  // namespace sailor::app
