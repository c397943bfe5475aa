// Whether a scheduler's plan can run: checked before any node is told of it
// (supervisor_scheduler.hpp).

#include <map>

#include <fmt/format.h>

#include "sailor/actors/placement.hpp"
#include "sailor/protocol/limits.hpp"
#include "supervisor_scheduler.hpp"

namespace sailor::actors::supervision {
namespace {

std::string where(std::size_t s, std::size_t r) {
  return "stage " + std::to_string(s) + " replica " + std::to_string(r);
}

// Every layer of the model in exactly one stage, in order.
std::optional<std::string> layer_refusal(const config::plan& p, int model_layers) {
  if (p.stages.empty())
    return "the plan has no stages";
  int next = 0;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& stage = p.stages[s];
    if (stage.num_layers <= 0)
      return "stage " + std::to_string(s) + " has " + std::to_string(stage.num_layers) +
             " layers, expected at least 1";
    if (stage.first_layer != next)
      return "stage " + std::to_string(s) + " starts at layer " +
             std::to_string(stage.first_layer) + ", expected " + std::to_string(next) +
             " (every layer in exactly one stage)";
    if (stage.replicas.empty())
      return "stage " + std::to_string(s) + " has no replicas";
    for (std::size_t r = 0; r < stage.replicas.size(); ++r)
      if (stage.replicas[r].tp < 1)
        return where(s, r) + " has tp " + std::to_string(stage.replicas[r].tp) +
               ", expected at least 1";
    next = stage.end_layer();
  }
  if (model_layers > 0 && next != model_layers)
    return "the stages cover layers 0.." + std::to_string(next - 1) + " of a model of " +
           std::to_string(model_layers) + " layers";
  return std::nullopt;
}

// No larger than a role assignment carries (protocol/limits.hpp: the assignment's size ceiling
// follows from these bounds), so that no node is sent a plan it must refuse.
std::optional<std::string> wire_refusal(const config::plan& p) {
  std::size_t devices = 0;
  for (const auto& stage : p.stages)
    for (const auto& r : stage.replicas)
      devices += r.nodes.size();
  if (p.stages.size() <= protocol::wire_bounds::plan_stages &&
      devices <= protocol::wire_bounds::plan_devices)
    return std::nullopt;
  return "the plan has " + std::to_string(p.stages.size()) + " stages on " +
         std::to_string(devices) + " devices, more than a role assignment carries (at most " +
         std::to_string(protocol::wire_bounds::plan_stages) + " stages, " +
         std::to_string(protocol::wire_bounds::plan_devices) + " devices)";
}

// Replicas placed by the scheduler name nodes that are available to plans.
std::optional<std::string> node_refusal(const config::plan& p,
                                        const std::map<std::string, const node_inventory*>& by) {
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    for (std::size_t r = 0; r < p.stages[s].replicas.size(); ++r)
      for (const auto& name : p.stages[s].replicas[r].nodes)
        if (!by.count(name))
          return where(s, r) + " uses node '" + name +
                 "', which is not a joined node available to plans";
  return std::nullopt;
}

// The plan's predicted peak memory (the most any one GPU of it needs) fits the largest
// accelerator it is placed on. Per-device needs are not in the estimate, so a plan is refused
// only when no device of it could hold its peak; CPU devices (a share of the host's memory,
// also behind emulated GPU types) are not checked.
std::optional<std::string> memory_refusal(const config::plan& placed,
                                          const std::map<std::string, const node_inventory*>& by) {
  if (!placed.estimate || placed.estimate->peak_memory_bytes <= 0)
    return std::nullopt;
  const double need = placed.estimate->peak_memory_bytes;
  const device_info* largest = nullptr;
  std::string largest_node;
  for (const auto& stage : placed.stages)
    for (const auto& rep : stage.replicas)
      for (std::size_t k = 0; k < rep.nodes.size() && k < rep.devices.size(); ++k) {
        auto n = by.find(rep.nodes[k]);
        if (n == by.end())
          continue;
        for (const auto& d : n->second->devices)
          if (d.index == rep.devices[k] && d.kind != "cpu" && d.memory_bytes > 0 &&
              (!largest || d.memory_bytes > largest->memory_bytes)) {
            largest = &d;
            largest_node = rep.nodes[k];
          }
      }
  if (!largest || static_cast<double>(largest->memory_bytes) >= need)
    return std::nullopt;
  return fmt::format("the plan's predicted peak memory {:.2f} GiB does not fit its largest "
                     "device (device {} of node {}, {:.2f} GiB)",
                     need / (1 << 30), largest->index, largest_node,
                     static_cast<double>(largest->memory_bytes) / (1 << 30));
}

bool stage_uses(const config::stage_plan& stage, const std::string& node) {
  for (const auto& rep : stage.replicas)
    for (const auto& n : rep.nodes)
      if (n == node)
        return true;
  return false;
}

std::optional<std::string> rule_refusal(const config::plan& placed,
                                        const std::vector<placement_rule>& rules) {
  for (const auto& rule : rules) {
    const int stages = placed.num_stages();
    if (rule.kind == placement_kind::pin) {
      if (rule.stage >= stages || !stage_uses(placed.stages[rule.stage], rule.node))
        return "the rule pinning stage " + std::to_string(rule.stage) + " to node " + rule.node +
               " is broken";
    } else if (rule.kind == placement_kind::forbid) {
      for (int s = 0; s < stages; ++s)
        if ((rule.stage < 0 || rule.stage == s) && stage_uses(placed.stages[s], rule.node))
          return "stage " + std::to_string(s) + " is on node " + rule.node +
                 ", which a rule forbids";
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> plan_refusal(const config::plan& p,
                                        const std::vector<node_inventory>& nodes,
                                        const std::vector<placement_rule>& rules,
                                        int model_layers) {
  if (auto why = layer_refusal(p, model_layers))
    return why;
  if (auto why = wire_refusal(p))
    return why;
  std::map<std::string, const node_inventory*> by;
  for (const auto& n : nodes)
    by[n.name] = &n;
  if (auto why = node_refusal(p, by))
    return why;
  auto placed = p;
  if (auto err = place_replicas(placed, nodes, rules)) {
    // Placeable only against a rule: name the rule rather than the devices it took away.
    auto unruled = p;
    if (!place_replicas(unruled, nodes))
      if (auto why = rule_refusal(unruled, rules))
        return why;
    return "placement: " + err->field + ": " + err->message;
  }
  if (auto why = memory_refusal(placed, by))
    return why;
  return rule_refusal(placed, rules);
}

}  // namespace sailor::actors::supervision
