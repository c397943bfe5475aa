#include "sailor/actors/placement.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "sailor/config/text.hpp"

namespace sailor::actors {
namespace {

sailor::error placement_error(error_kind kind, std::string message, std::string field) {
  return sailor::error{kind, std::move(message), "", 0, std::move(field)};
}

std::string field_of(std::size_t s, std::size_t r) {
  return "stages[" + std::to_string(s) + "].replicas[" + std::to_string(r) + "]";
}

}  // namespace

status place_replicas(config::plan& p, const std::vector<node_inventory>& nodes) {
  std::map<std::string, const node_inventory*> by_name;
  for (auto& n : nodes)
    by_name[n.name] = &n;
  // Free devices per node, in index order.
  std::map<std::string, std::vector<int>> free;
  for (auto& n : nodes)
    for (auto& d : n.devices)
      free[n.name].push_back(d.index);
  auto take = [&](const std::string& node, int device) {
    auto& v = free[node];
    auto i = std::find(v.begin(), v.end(), device);
    if (i == v.end())
      return false;
    v.erase(i);
    return true;
  };
  auto placed = p;
  // Pre-placed replicas first, so that automatic placement does not take their devices.
  for (std::size_t s = 0; s < placed.stages.size(); ++s)
    for (std::size_t r = 0; r < placed.stages[s].replicas.size(); ++r) {
      auto& rep = placed.stages[s].replicas[r];
      if (rep.nodes.empty())
        continue;
      if (rep.nodes.size() != rep.devices.size() || static_cast<int>(rep.devices.size()) != rep.tp)
        return placement_error(error_kind::invalid_input,
                               "a placed replica needs tp node/device pairs", field_of(s, r));
      for (std::size_t k = 0; k < rep.nodes.size(); ++k) {
        if (!by_name.count(rep.nodes[k]))
          return placement_error(error_kind::not_found, "node '" + rep.nodes[k] + "' has not joined",
                                 field_of(s, r));
        if (!take(rep.nodes[k], rep.devices[k]))
          return placement_error(error_kind::invalid_input,
                                 "device " + std::to_string(rep.devices[k]) + " of node '" +
                                   rep.nodes[k] + "' is missing or already used",
                                 field_of(s, r));
      }
    }
  for (std::size_t s = 0; s < placed.stages.size(); ++s)
    for (std::size_t r = 0; r < placed.stages[s].replicas.size(); ++r) {
      auto& rep = placed.stages[s].replicas[r];
      if (!rep.nodes.empty())
        continue;
      if (rep.tp < 1)
        return placement_error(error_kind::invalid_input, "tp must be at least 1", field_of(s, r));
      auto fits = [&](const node_inventory& n) {
        return n.zone == rep.zone && (rep.gpu_type.empty() || n.gpu_type == rep.gpu_type);
      };
      // One node with tp free devices if there is one (TP stays inside a node)...
      const node_inventory* host = nullptr;
      for (auto& n : nodes)
        if (fits(n) && static_cast<int>(free[n.name].size()) >= rep.tp) {
          host = &n;
          break;
        }
      if (host) {
        for (int k = 0; k < rep.tp; ++k) {
          rep.nodes.push_back(host->name);
          rep.devices.push_back(free[host->name].front());
          free[host->name].erase(free[host->name].begin());
        }
        continue;
      }
      // ...otherwise across nodes of the zone.
      std::vector<std::pair<std::string, int>> picked;
      for (auto& n : nodes) {
        if (!fits(n))
          continue;
        for (int d : free[n.name])
          if (static_cast<int>(picked.size()) < rep.tp)
            picked.emplace_back(n.name, d);
      }
      if (static_cast<int>(picked.size()) < rep.tp)
        return placement_error(error_kind::infeasible,
                               "not enough free " +
                                 (rep.gpu_type.empty() ? std::string("devices") : rep.gpu_type) +
                                 " devices in zone '" + rep.zone + "' for tp " +
                                 std::to_string(rep.tp),
                               field_of(s, r));
      for (auto& [node, device] : picked) {
        take(node, device);
        rep.nodes.push_back(node);
        rep.devices.push_back(device);
      }
    }
  p = std::move(placed);
  return std::nullopt;
}

std::map<std::string, std::vector<stage_role>> roles_by_node(const config::plan& p,
                                                             std::int64_t plan_version) {
  std::map<std::string, std::vector<stage_role>> out;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    auto& stage = p.stages[s];
    for (std::size_t r = 0; r < stage.replicas.size(); ++r) {
      auto& rep = stage.replicas[r];
      for (std::size_t k = 0; k < rep.nodes.size(); ++k) {
        stage_role role;
        role.plan_version = plan_version;
        role.stage = static_cast<int>(s);
        role.replica = static_cast<int>(r);
        role.tp_rank = static_cast<int>(k);
        role.tp = rep.tp;
        role.device = k < rep.devices.size() ? rep.devices[k] : 0;
        role.first_layer = stage.first_layer;
        role.num_layers = stage.num_layers;
        role.micro_batch = p.micro_batch;
        role.num_stages = p.num_stages();
        role.gpu_type = rep.gpu_type;
        role.zone = rep.zone;
        out[rep.nodes[k]].push_back(role);
      }
    }
  }
  return out;
}

result<config::plan> even_plan(const std::vector<node_inventory>& nodes, int num_all_layers,
                               int global_batch) {
  std::map<std::pair<std::string, std::string>, int> groups;  // (zone, gpu type) -> devices
  for (auto& n : nodes)
    if (!n.devices.empty())
      groups[{n.zone, n.gpu_type}] += static_cast<int>(n.devices.size());
  if (groups.empty())
    return sailor::error{error_kind::infeasible, "no devices to plan over", "", 0, "nodes"};
  if (num_all_layers < 1)
    return sailor::error{error_kind::invalid_input, "the model has no layers", "", 0, "model"};
  int stages = num_all_layers;
  for (auto& [key, count] : groups)
    stages = std::min(stages, count);
  config::plan p;
  p.micro_batch = 1;
  p.global_batch = global_batch;
  int base = num_all_layers / stages;
  int extra = num_all_layers % stages;
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    config::stage_plan stage;
    stage.first_layer = first;
    stage.num_layers = base + (s < extra ? 1 : 0);
    first += stage.num_layers;
    for (auto& [key, count] : groups)
      for (int k = 0; k < count / stages; ++k)
        stage.replicas.push_back(config::replica{key.second, key.first, 1, {}, {}});
    p.stages.push_back(std::move(stage));
  }
  return p;
}

std::string describe_plan(const config::plan& p) {
  std::ostringstream out;
  out << count_of(p.num_stages(), "stage") << ", micro-batch " << p.micro_batch << ", global batch "
      << p.global_batch;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    auto& stage = p.stages[s];
    out << "\n  stage " << s << ": layers " << stage.first_layer << ".." << stage.end_layer() - 1
        << ", " << count_of(static_cast<long long>(stage.replicas.size()), "replica") << ":";
    for (auto& rep : stage.replicas) {
      out << " [" << rep.gpu_type << "@" << rep.zone << " tp" << rep.tp;
      for (std::size_t k = 0; k < rep.nodes.size(); ++k)
        out << (k == 0 ? " " : ",") << rep.nodes[k] << "/" << rep.devices[k];
      out << "]";
    }
  }
  return out.str();
}

}  // namespace sailor::actors
