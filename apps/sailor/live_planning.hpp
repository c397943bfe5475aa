#pragma once
// The closed loop of `sailor demo` / `sailor train`: plans chosen by the planner's search over
// the nodes that joined, fed by the model's profile measured on this machine (per device
// type, cached by device type, model and build) and the emulated zone links; predictions
// corrected by what the running job measured (simulator/correction.hpp).
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "demo_profile.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/simulator/correction.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::app {

/// How our runtime runs on CPU devices, with the host figures of the profile when there is one.
using simulator::cpu_sim_options;

/// What the loop learned from the running job: written by the supervisor's iteration callback,
/// read by the planner (both under `mu`).
struct live_loop {
  std::mutex mu;
  simulator::speed_correction correction;
  double raw_predicted_s = 0;  ///< the running plan's prediction before correction
  /// Of it, the all-reduce of stages whose replicas span zones: left out of the GPU type's
  /// samples with the measured all-reduce, so that a slow link is corrected as the link's, not
  /// as the devices' (0: nothing crosses a zone).
  double raw_cross_zone_s = 0;
  std::string bottleneck_type;  ///< GPU type of the running plan's bottleneck stage
  std::int64_t plan_start_iteration = -1;  ///< its first iteration (warm-up: not a sample)
  std::vector<std::string> refused;  ///< why samples were not trusted (the last few)
  /// Nodes left out of plans (stragglers); they come back, at their speed in `slowed`, into
  /// the plan made when capacity is lost.
  std::set<std::string> excluded;
  /// Nodes planned at their measured speed: times slower than their type (each planned as a
  /// type of its own, simulator::add_slowed_type); a node left out keeps the speed it was left
  /// out at.
  std::map<std::string, double> slowed;
  /// Per zone pair (simulator::link_key): measured over predicted all-reduce of the stages
  /// whose replicas span the pair; plans are searched and predicted on links corrected by it.
  simulator::speed_correction links;
  /// A node looks slow: its iterations are not folded into the type's correction (they say
  /// something about the node, not the type) until a plan without it runs.
  bool suspect = false;

  /// Folds one completed iteration into the correction.
  void observe(const actors::iteration_record& r);
  /// A new plan runs from `start_iteration` predicted `raw_s` (uncorrected), `cross_zone_s`
  /// of it in all-reduces across zones.
  void on_plan(int start_iteration, double raw_s, const std::string& type,
               double cross_zone_s = 0);
};

/// The search's plan over `nodes` (unplaced: the supervisor places it), fed by `profile` (null:
/// the catalog's analytic model) corrected by `correction`, over `cluster`'s zones and links.
result<config::plan> search_plan(const std::vector<actors::node_inventory>& nodes,
                                 const config::cluster& cluster, const config::model_shape& model,
                                 const config::job& job, const measured_profile* profile,
                                 const simulator::speed_correction& correction);

}  // namespace sailor::app
