#pragma once
// Stragglers kept at their measured speed (issue 14): a node the loop measured F times slower
// than its type is planned as a type of its own ("CPU~slow2.00x": the catalog entry and the
// profile of its type, F times slower; simulator::add_slowed_type), so that the search gives
// it the share its speed is worth (fewer layers) or leaves it out when that is faster. The
// plan handed to the runtime carries the real types again.
#include <map>
#include <string>
#include <vector>

#include "sailor/actors/messages.hpp"
#include "sailor/config/gpu.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/profile.hpp"

namespace sailor::app {

class slowed_nodes {
public:
  /// The nodes of `nodes` that `factors` (node -> times slower) names with a factor over 1.
  slowed_nodes(const std::map<std::string, double>& factors,
               const std::vector<actors::node_inventory>& nodes);

  bool empty() const { return real_type_.empty(); }
  /// The slowed nodes' GPU type becomes their slowed type.
  void rename(std::vector<actors::node_inventory>& nodes) const;
  /// Adds every slowed type to the catalog (the search and the simulator time it from there
  /// when no profile does).
  void add_to(config::gpu_catalog& catalog) const;
  /// Adds every slowed type that `profile` can time.
  void add_to(config::model_profile& profile) const;
  /// Every replica of a slowed type gets its real type back.
  void restore(config::plan& p) const;
  /// The node's slowed type ("" : not slowed).
  std::string type_of(const std::string& node) const;

private:
  std::map<std::string, std::string> real_type_;  // node -> its type
  std::map<std::string, double> factor_;          // node -> times slower
};

/// Whether any replica of `p` runs on `node`.
bool plan_uses(const config::plan& p, const std::string& node);

}  // namespace sailor::app
