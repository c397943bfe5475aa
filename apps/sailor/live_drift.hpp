#pragma once
// The main loop's part of the closed loop in `sailor demo` / `sailor train` (issue 14): the
// emulated straggler (--straggler-at), the emulated link change (--link-change-at) and the
// drift watch (drift_watch.hpp) over the board's rank reports.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "drift_watch.hpp"
#include "local_planning.hpp"
#include "local_progress.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/status_board.hpp"

namespace sailor::app {

struct local_run_args;
class local_cluster;
struct training_events;

/// The main loop's part of the closed loop in `sailor demo` / `sailor train`: slows the
/// emulated straggler (--straggler-at) and asks the supervisor to re-plan when drift_watch
/// says so.
/// The longest predicted all-reduce among `plan`'s stages whose replicas span zones (0: none).
double cross_zone_allreduce_s(const plan_prediction& prediction, const config::plan& plan);

class local_drift {
public:
  local_drift(const local_run_args& args, local_planning_inputs planning,
              std::shared_ptr<actors::status_board> board);
  /// Once per turn of the main loop.
  void step(local_cluster& cluster, training_events& events, local_progress& progress);

private:
  void slow_one_node(local_cluster& cluster, training_events& events, local_progress& progress);
  // --link-change-at: every node's --link-file gets the change, then SIGUSR2.
  void change_link(local_cluster& cluster, local_progress& progress);

  int straggler_at_ = 0;
  double straggler_slowdown_ = 1;
  int iterations_ = 0;
  bool enabled_ = false;
  bool straggled_ = false;
  int link_change_at_ = 0;
  std::string link_change_;
  bool link_changed_ = false;
  std::shared_ptr<actors::status_board> board_;
  drift_watch watch_;
  std::shared_ptr<live_loop> planning_loop_;
};

}  // namespace sailor::app
