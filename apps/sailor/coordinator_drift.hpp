#pragma once
// `sailor coordinator`'s part of the closed loop (issue 14): the same drift watch as
// `sailor demo` (drift_watch.hpp), fed from the supervisor's callbacks and its board.
//
//   planner actor  --planned(nodes, prediction)-->  coordinator_drift
//   supervisor     --plan_started / iteration--->   (running plan, its records; the loop's
//                                                    correction, live_planning.hpp)
//   drift thread   --every 200 ms: drift_watch::check on the board's rank reports-->
//                  drift_replan_atom(why) to the supervisor, which re-plans with that reason
//
// Only with --planner search and --train-dir: the watch compares each node's compute with its
// stage's predicted compute, and asks the search what a plan around a straggler would give.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "drift_watch.hpp"
#include "local_planning.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/status_board.hpp"
#include "sailor/actors/supervisor_interface.hpp"
#include "sailor/actors/train_progress.hpp"

namespace sailor::app {

class coordinator_drift {
public:
  explicit coordinator_drift(bool enabled) : enabled_(enabled) {}
  ~coordinator_drift() { stop(); }
  coordinator_drift(const coordinator_drift&) = delete;
  coordinator_drift& operator=(const coordinator_drift&) = delete;

  /// The planning function of --planner search: plan_and_predict over the request, each
  /// plan's prediction kept for the drift watch (and the loop's correction applied).
  actors::planning_function planner(local_planning_inputs planning);

  // -- the supervisor's thread ----------------------------------------------------------
  /// A plan's training starts (its prediction is the newest the planner made).
  void plan_started(const actors::training_job& tj);
  void iteration(const actors::iteration_record& r, const actors::training_progress& p);

  /// Starts the drift thread (no-op unless enabled and planner() was called).
  void start(std::shared_ptr<actors::status_board> board, actors::supervisor_actor supervisor);
  /// Stops and joins it; idempotent.
  void stop();

private:
  void run(std::shared_ptr<actors::status_board> board, actors::supervisor_actor supervisor);
  void planned(const std::vector<actors::node_inventory>& nodes, const plan_prediction& p);

  const bool enabled_;
  std::shared_ptr<live_loop> loop_;  ///< null until planner()
  std::optional<drift_watch> watch_; ///< the drift thread's only
  std::mutex mu_;                    ///< everything below
  std::condition_variable wake_;
  bool stopping_ = false;
  plan_prediction newest_, running_;
  std::int64_t plan_version_ = 0;
  std::optional<config::plan> current_;
  std::vector<actors::node_inventory> nodes_;
  std::vector<actors::iteration_record> records_;
  int total_ = 0, completed_ = 0;
  std::thread thread_;
};

}  // namespace sailor::app
