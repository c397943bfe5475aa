#pragma once
// What `sailor train`, `sailor demo` and `sailor replay --live` share before their processes
// start (see local_cluster.hpp): the inputs read and checked, the training settings, the
// local planner's inputs and the coordinator's options with the supervisor's callbacks.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "local_cluster.hpp"
#include "local_planning.hpp"
#include "local_progress.hpp"
#include "training_setup.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::app {

struct live_loop;  // live_planning.hpp

/// What the run is made of, once every input was read and checked.
struct local_inputs {
  config::model_shape model;
  config::job job;
  config::cluster cluster;  ///< the local zones
  std::optional<config::plan> fixed;
  std::string node_binary;
  int iterations = 0;
};

/// Reads and checks the inputs `args` names; `work`: the run's folder (the demo's corpus is
/// joined there).
result<local_inputs> load_inputs(const local_run_args& args, const std::filesystem::path& work);

training_settings settings_for(const local_inputs& in, const local_run_args& args,
                               const std::filesystem::path& work);

/// What the local planner plans with; `loop` learns from the running job.
local_planning_inputs planning_inputs_for(const local_inputs& in, const local_run_args& args,
                                          const std::filesystem::path& work,
                                          std::shared_ptr<live_loop> loop);

/// The coordinator: the local planner, the supervisor's callbacks into `events` (quorum:
/// args.nodes).
actors::coordinator_options coordinator_options_for(const local_inputs& in,
                                                    const local_run_args& args,
                                                    const training_settings& settings,
                                                    training_events& events,
                                                    local_planning_inputs planning);

}  // namespace sailor::app
