#pragma once
// `sailor replay --trace T... --model M --job J [--json]`: a spot availability timeline through
// the planner and simulator, ours against the baselines (planner/spot_replay.hpp).
#include <string>
#include <vector>

#include "sailor/planner/spot_replay.hpp"

namespace sailor::app {

struct spot_replay_options {
  std::vector<std::string> traces;
  std::string model, job, cluster, sailor_data, profile;
  std::string objective = "liveput";
  int gbs = 0;
  double target_iterations = 0;
  bool as_json = false;
  bool changes = false;  ///< every change of plan, with the plan
  bool skip_empty_start = false;
  planner::recovery_model recovery;
};

int run_spot_replay(const spot_replay_options& opt);

}  // namespace sailor::app
