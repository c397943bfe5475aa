#include "sailor/actors/placement.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "sailor/config/local_sgd.hpp"
#include "sailor/config/text.hpp"

namespace sailor::actors {
namespace {

std::string field_of(std::size_t s, std::size_t r) {
  return "stages[" + std::to_string(s) + "].replicas[" + std::to_string(r) + "]";
}

}  // namespace

namespace {

// The devices of the joined nodes not taken yet, in index order.
struct free_devices {
  std::map<std::string, std::vector<int>> free;

  explicit free_devices(const std::vector<node_inventory>& nodes) {
    for (auto& n : nodes)
      for (auto& d : n.devices)
        free[n.name].push_back(d.index);
  }
  bool take(const std::string& node, int device) {
    auto& v = free[node];
    auto i = std::find(v.begin(), v.end(), device);
    if (i == v.end())
      return false;
    v.erase(i);
    return true;
  }
  int count(const std::string& node) { return static_cast<int>(free[node].size()); }
  // The whole TP group of `rep` on `node`, which has the devices free.
  void place_all(config::replica& rep, const std::string& node) {
    for (int k = 0; k < rep.tp; ++k) {
      rep.nodes.push_back(node);
      rep.devices.push_back(free[node].front());
      free[node].erase(free[node].begin());
    }
  }
};

bool forbidden(const std::vector<placement_rule>& rules, const std::string& node, int stage) {
  return std::any_of(rules.begin(), rules.end(), [&](const placement_rule& r) {
    return r.kind == protocol::placement_kind::forbid && r.node == node && (r.stage < 0 || r.stage == stage);
  });
}

bool stage_on(const config::stage_plan& stage, const std::string& node) {
  for (auto& rep : stage.replicas)
    if (std::find(rep.nodes.begin(), rep.nodes.end(), node) != rep.nodes.end())
      return true;
  return false;
}

// Replicas the plan already placed: checked, and their devices taken.
status take_placed(config::plan& placed, const std::map<std::string, const node_inventory*>& by_name,
                   free_devices& devices) {
  for (std::size_t s = 0; s < placed.stages.size(); ++s)
    for (std::size_t r = 0; r < placed.stages[s].replicas.size(); ++r) {
      auto& rep = placed.stages[s].replicas[r];
      if (rep.nodes.empty())
        continue;
      if (rep.nodes.size() != rep.devices.size() || static_cast<int>(rep.devices.size()) != rep.tp)
        return sailor::error::invalid_input(field_of(s, r), "a placed replica needs tp node/device pairs");
      for (std::size_t k = 0; k < rep.nodes.size(); ++k) {
        if (!by_name.count(rep.nodes[k]))
          return sailor::error::not_found("", field_of(s, r), "node '" + rep.nodes[k] + "' has not joined");
        if (!devices.take(rep.nodes[k], rep.devices[k]))
          return sailor::error::invalid_input(field_of(s, r), "device " + std::to_string(rep.devices[k]) + " of node '" +
                                              rep.nodes[k] + "' is missing or already used");
      }
    }
  return std::nullopt;
}

// Each pin (stage on node) the plan's placed replicas do not keep already: the first
// unplaced replica of the stage that fits the node goes there whole, before any other
// replica takes the node's devices.
void place_pins(config::plan& placed, const std::vector<node_inventory>& nodes,
                const std::vector<placement_rule>& rules, free_devices& devices) {
  for (auto& rule : rules) {
    if (rule.kind != protocol::placement_kind::pin || rule.stage < 0 || rule.stage >= placed.num_stages())
      continue;
    auto& stage = placed.stages[rule.stage];
    auto node = std::find_if(nodes.begin(), nodes.end(),
                             [&rule](const node_inventory& n) { return n.name == rule.node; });
    if (node == nodes.end() || stage_on(stage, rule.node))
      continue;
    for (auto& rep : stage.replicas)
      if (rep.nodes.empty() && rep.tp >= 1 && node->zone == rep.zone &&
          (rep.gpu_type.empty() || node->gpu_type == rep.gpu_type) &&
          devices.count(node->name) >= rep.tp) {
        devices.place_all(rep, node->name);
        break;
      }
  }
}

// One unplaced replica of stage `s`: on one node of its zone and GPU type with tp free
// devices if there is one (TP stays inside a node), else across nodes of the zone; never on
// a node a rule forbids for the stage.
status place_one(config::replica& rep, std::size_t s, std::size_t r,
                 const std::vector<node_inventory>& nodes,
                 const std::vector<placement_rule>& rules, free_devices& devices) {
  if (rep.tp < 1)
    return sailor::error::invalid_input(field_of(s, r), "tp must be at least 1");
  auto fits = [&](const node_inventory& n) {
    return n.zone == rep.zone && (rep.gpu_type.empty() || n.gpu_type == rep.gpu_type) &&
           !forbidden(rules, n.name, static_cast<int>(s));
  };
  for (auto& n : nodes)
    if (fits(n) && devices.count(n.name) >= rep.tp) {
      devices.place_all(rep, n.name);
      return std::nullopt;
    }
  std::vector<std::pair<std::string, int>> picked;
  for (auto& n : nodes) {
    if (!fits(n))
      continue;
    for (int d : devices.free[n.name])
      if (static_cast<int>(picked.size()) < rep.tp)
        picked.emplace_back(n.name, d);
  }
  if (static_cast<int>(picked.size()) < rep.tp)
    return sailor::error::infeasible(field_of(s, r), "not enough free " +
                                     (rep.gpu_type.empty() ? std::string("devices") : rep.gpu_type) +
                                     " devices in zone '" + rep.zone + "' for tp " +
                                     std::to_string(rep.tp) +
                                     (rules.empty() ? "" : " (on nodes the placement rules allow)"));
  for (auto& [node, device] : picked) {
    devices.take(node, device);
    rep.nodes.push_back(node);
    rep.devices.push_back(device);
  }
  return std::nullopt;
}

}  // namespace

status place_replicas(config::plan& p, const std::vector<node_inventory>& nodes,
                      const std::vector<placement_rule>& rules) {
  std::map<std::string, const node_inventory*> by_name;
  for (auto& n : nodes)
    by_name[n.name] = &n;
  free_devices devices{nodes};
  auto placed = p;
  // Pre-placed replicas first, so that automatic placement does not take their devices.
  if (auto err = take_placed(placed, by_name, devices))
    return err;
  place_pins(placed, nodes, rules, devices);
  for (std::size_t s = 0; s < placed.stages.size(); ++s)
    for (std::size_t r = 0; r < placed.stages[s].replicas.size(); ++r) {
      auto& rep = placed.stages[s].replicas[r];
      if (!rep.nodes.empty())
        continue;
      if (auto err = place_one(rep, s, r, nodes, rules, devices))
        return err;
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
    return sailor::error::infeasible("nodes", "no devices to plan over");
  if (num_all_layers < 1)
    return sailor::error::invalid_input("model", "the model has no layers");
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
  if (p.local_sgd) out << "\n  across regions: " << config::describe_local_sgd(p);
  return out.str();
}

int ranks_on_node(const config::plan& p, const std::string& node) {
  int ranks = 0;
  for (const auto& stage : p.stages)
    for (const auto& r : stage.replicas)
      ranks += static_cast<int>(std::count(r.nodes.begin(), r.nodes.end(), node));
  return ranks;
}

namespace {
std::string host_of(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}
}  // namespace

int ranks_on_host(const config::plan& p, const std::vector<std::string>& nodes,
                  const std::vector<std::string>& addresses, const std::string& node) {
  std::string host;
  for (std::size_t i = 0; i < nodes.size() && i < addresses.size(); ++i)
    if (nodes[i] == node) host = host_of(addresses[i]);
  if (host.empty()) return ranks_on_node(p, node);
  int ranks = 0;
  for (std::size_t i = 0; i < nodes.size() && i < addresses.size(); ++i)
    if (host_of(addresses[i]) == host) ranks += ranks_on_node(p, nodes[i]);
  return ranks;
}

int rank_threads(int job_threads, int node_threads, int ranks, unsigned cores) {
  if (job_threads > 0) return job_threads;
  if (node_threads > 0) return node_threads;
  return std::max(1, static_cast<int>(cores) / std::max(1, ranks));
}

}  // namespace sailor::actors
