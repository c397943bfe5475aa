#pragma once
// `sailor coordinator --emulate-links` (issue 14): the links between the zones of the nodes
// that joined, probed over comm's transport through the link shaper the nodes' transfers pass
// (comm/link_probe.hpp), and given to the planner and simulator instead of the configured
// figures. The probe runs in the coordinator's process, between two endpoints of the zone pair
// on loopback: on one machine that emulates its zones, that is the link the nodes get.
// Probing real links between hosts needs node-to-node probes, which are not built. A probe
// that fails or times out keeps the configured link, with a warning naming the zone pair.
// Each pair is probed once.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sailor/actors/messages.hpp"
#include "sailor/config/cluster.hpp"

namespace sailor::app {

class zone_link_probes {
public:
  explicit zone_link_probes(config::cluster configured) : configured_(std::move(configured)) {}

  /// The configured cluster with the link of every pair of `nodes`' zones as probed.
  config::cluster network_for(const std::vector<actors::node_inventory>& nodes);

private:
  // The pair's link as measured (nullopt: the probe failed, said on stderr).
  std::optional<config::zone_link> probe(const std::string& a, const std::string& b) const;

  std::mutex mu_;  // probed_
  const config::cluster configured_;
  std::map<std::pair<std::string, std::string>, std::optional<config::zone_link>> probed_;
};

}  // namespace sailor::app
