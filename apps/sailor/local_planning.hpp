#pragma once
// The plan callback of `sailor train` / `sailor demo`: the planner's plan over the nodes that
// joined (or a fixed one), refused when the model does not fit a device, and predicted by the
// simulator, first from the catalog alone, then from the model's profile measured on this
// machine (`sailor-node profile`, cached in --profile).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "demo_profile.hpp"
#include "local_progress.hpp"
#include "sailor/actors/planner_actor.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::app {

struct live_loop;  // live_planning.hpp

struct local_planning_inputs {
  std::optional<config::plan> fixed;  ///< a plan file's plan instead of the planner's
  config::cluster cluster;            ///< the local zones (local_zones_cluster)
  config::model_shape model;
  config::job job;
  profile_request profile;            ///< the cache and the model file to profile
  std::string node_binary;
  std::filesystem::path work;
  /// "search" (the planner's search on the profile) or "even" (layers split evenly).
  std::string policy = "search";
  /// What the running job measured (null: predictions are not corrected).
  std::shared_ptr<live_loop> loop;
  /// Where the profile comes from for a request's nodes and a plan's shape (null:
  /// obtain_profile on `profile`, measured on this machine). `sailor coordinator`'s: a
  /// profile file, and for CPU nodes measured here (coordinator_search.hpp). `cached_only`:
  /// only a profile at hand, else an error (a re-plan of a running job does not stop it to
  /// measure one).
  std::function<result<measured_profile>(const actors::plan_request&, const config::plan&,
                                         bool cached_only)>
    profile_source;
  /// The network to plan a request's nodes on (null: `cluster` as configured); `sailor
  /// coordinator --emulate-links`: the zone links probed (link_probes.hpp).
  std::function<config::cluster(const actors::plan_request&)> network;
  /// Refuse plans that do not fit a device's memory (a control plane that trains nothing
  /// does not).
  bool refuse_unfit = true;
};

/// A plan and its prediction.
struct planned {
  config::plan plan;
  plan_prediction prediction;
};

/// What the planning function chooses over the request's nodes (less those the loop left
/// out), placed on them, and its prediction (corrected by the loop). `what_if`: only asking
/// (the drift check): the profile is not taken again for another count of processes.
result<planned> plan_and_predict(const local_planning_inputs& in,
                                 const actors::plan_request& request, bool what_if);

/// The planning function; every plan's prediction goes to `predicted` (on the planner's
/// thread) before the plan is returned.
actors::planning_function local_planner(local_planning_inputs in,
                                        std::function<void(const plan_prediction&)> predicted);

}  // namespace sailor::app
