#pragma once
// `sailor coordinator --planner search`: the planner's search over the nodes that joined, on
// the profiles at hand: a profile file (--profile), else for CPU nodes the model's profile
// measured on this machine (`sailor-node profile`, cached in --profile-cache), else the
// catalog's analytic model with a warning naming the device types without a profile. Links
// come from the cluster file, or as the nodes probed them (--emulate-links, --probe-links:
// link_probes.hpp). Plans are made and predicted by
// plan_and_predict, as in `sailor demo`: the loop's correction, its stragglers left out or
// planned at their measured speed (coordinator_drift.hpp).
#include <memory>
#include <string>

#include "local_planning.hpp"
#include "sailor/actors/planner_actor.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

class zone_link_probes;

struct coordinator_search_inputs {
  config::model_shape model;
  config::cluster cluster;
  config::job job;
  std::string model_file;   ///< what profiling processes load
  std::string profile_file; ///< a profile JSON of the model ("" : none)
  std::string cache_dir;    ///< profiles measured here are cached there ("" : not kept)
  std::string node_binary;  ///< sailor-node, to profile CPU devices ("" : no profiling)
  std::string work_dir;     ///< where profiling runs
  bool training = false;    ///< refuse plans that do not fit a device's memory
  /// Plan on the zone links probed (link_probes.hpp); null: the configured links.
  std::shared_ptr<zone_link_probes> probes;
};

/// What plan_and_predict plans with; errors on a profile file that cannot be read (naming it).
result<local_planning_inputs> coordinator_search(coordinator_search_inputs in);

}  // namespace sailor::app
