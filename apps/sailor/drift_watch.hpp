#pragma once
// Re-planning on drift (issue 14): the live job's per-rank telemetry against the plan's
// per-stage prediction. A node whose compute, normalised by its stage's predicted compute,
// runs `slow_factor` times over its own earlier figure (and over its peers') is a straggler;
// the job then asks the search for the best plan with that node at its measured speed (a GPU
// type of its own, live_slow_nodes.hpp: it gets a smaller share, kept only when that is
// predicted faster than the plan without it by `threshold`; same profile, with the loop's
// correction), and re-plans when that beats the measured iteration time by more than
// `threshold` after paying for the re-plan (its time spread over the iterations left).
// Hysteresis: a node must be slow over `window` iterations, a node left out stays out, and no
// second drift re-plan comes within `cooldown` iterations.
//
// Links: a zone pair's correction (its all-reduce measured against the prediction) that moved
// `link_factor` times off what the running plan was predicted with makes it ask the search on
// the corrected links, and re-plan on the same terms; the search is asked again about that
// pair only when its factor moved 10% more. Why not (the gain under the threshold, a fixed
// plan) goes out with link_note().
//
// One watch serves both live paths: `sailor demo`/`sailor train` (live_drift.hpp) and
// `sailor coordinator` (coordinator_drift.hpp); each gives it the running plan's prediction,
// the rank reports and the completed iterations, and sends the supervisor drift_replan_atom
// with the reason it returns.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "live_planning.hpp"
#include "local_planning.hpp"
#include "local_progress.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/status_board.hpp"

namespace sailor::app {

struct drift_options {
  int window = 3;            ///< iterations a node must be slow, and the measured median's span
  int baseline = 3;          ///< a node's first samples: its normal speed
  double slow_factor = 1.5;  ///< compute ratio over the node's baseline that marks it slow
  double threshold = 0.10;   ///< predicted gain needed to re-plan, after the re-plan's cost
  /// Time a re-plan costs (planning, rendezvous, restoring the checkpoint, the first
  /// iteration's warm-up): about 1.5 s for the demo's tiny model on this 2-core machine.
  double replan_cost_s = 2;
  int cooldown = 4;          ///< iterations after a drift re-plan before the next
  /// A zone pair's correction this many times (or its inverse) what the running plan was
  /// predicted with makes the job ask the search again (a link changed, or was mispredicted).
  double link_factor = 2;
  /// All-reduces measured over a link (two per iteration of a two-replica stage) before its
  /// drift is acted on: the first few after a plan starts are noisy.
  std::size_t link_samples = 6;
};

/// A node's compute against its stage's prediction, over time.
class node_speeds {
public:
  /// One rank's iteration: measured compute and its stage's predicted compute per iteration.
  /// Samples that cannot be trusted (zero, negative, not finite) are dropped.
  void add(const std::string& node, double compute_s, double predicted_compute_s,
           std::int64_t iteration = -1);
  /// The node's recent ratio over its baseline (1 while it has too few samples).
  double slowdown(const std::string& node, const drift_options& o) const;
  /// The slowest node over `o.slow_factor` (and over that factor times its peers' median), if
  /// any; nodes in `left_out` (no longer planned on) are not judged.
  std::optional<std::pair<std::string, double>> straggler(const drift_options& o,
                                                          const std::set<std::string>& left_out = {}) const;
  /// The first iteration of the node's latest run of samples a quarter or more over its
  /// baseline (when it began to slow down; -1: not known).
  std::int64_t slow_since(const std::string& node, const drift_options& o) const;

private:
  std::map<std::string, std::vector<double>> ratios_;
  std::map<std::string, std::vector<std::int64_t>> iterations_;  // of each ratio
};

/// The plan the search would make over a request's nodes, and its prediction, without
/// making it (plan_and_predict with what_if).
using what_if_planner = std::function<result<planned>(const actors::plan_request&)>;

/// Watches the rank reports of the running plan (the board's): from the main loop of
/// `sailor demo` (live_drift.hpp) and from the drift thread of `sailor coordinator`
/// (coordinator_drift.hpp).
class drift_watch {
public:
  /// `loop`: what the running job measured (null: a straggler is only ever left out).
  drift_watch(what_if_planner what_if, std::shared_ptr<live_loop> loop,
              std::vector<actors::node_inventory> nodes, drift_options o = {})
      : what_if_(std::move(what_if)), loop_(std::move(loop)), nodes_(std::move(nodes)),
        options_(o) {}

  /// The nodes plans are made over now (the coordinator's: those of the newest request).
  void set_nodes(std::vector<actors::node_inventory> nodes) { nodes_ = std::move(nodes); }

  /// Takes the newest rank reports of the running plan; returns why to re-plan, if the job
  /// should. `records`: the completed iterations so far; `left`: iterations still to run.
  std::optional<std::string> check(const std::vector<actors::board_rank_report>& reports,
                                   const plan_prediction& running, std::int64_t plan_version,
                                   const std::vector<actors::iteration_record>& records, int left,
                                   const std::set<std::string>& gone,
                                   const std::optional<config::plan>& current);

  /// What changed in the links' correction since the last note (by 10% or more), and why a
  /// link's drift did not re-plan, as a line for the log and `sailor status`; nothing when
  /// nothing did.
  std::optional<std::string> link_note();

private:
  // A rank's all-reduce against its stage's prediction, into the correction of the zone pair
  // its stage spans (stages within one zone, or over more than two, give no link sample).
  void observe_link(const actors::train_report& r, const plan_prediction& running,
                    const config::plan& current);
  // The best plan with `slow` at its measured speed (or without it), as the search sees it.
  result<planned> best_around(const std::pair<std::string, double>& slow,
                              const std::set<std::string>& gone,
                              const std::optional<config::plan>& current);
  // A re-plan not made: the node's planned speed is what it was.
  void forget_slowdown(const std::string& node);
  // Why to re-plan when a zone pair's correction moved `link_factor` times off what the
  // running plan was predicted with and the search's plan on the corrected links beats the
  // measured iteration time by the threshold; a fixed plan is never re-planned (why not is
  // noted instead).
  // Whether a zone pair's correction moved `link_factor` times off the running plan's.
  bool link_drifted(const plan_prediction& running) const;
  std::optional<std::string> link_drift(const plan_prediction& running,
                                        const std::vector<actors::iteration_record>& records,
                                        int left, const std::set<std::string>& gone,
                                        const std::optional<config::plan>& current);

  what_if_planner what_if_;
  std::shared_ptr<live_loop> loop_;
  double previous_slowdown_ = 0;
  std::vector<actors::node_inventory> nodes_;
  drift_options options_;
  node_speeds speeds_;
  std::map<std::string, double> noted_links_;  ///< link factors last told
  std::map<std::string, double> asked_links_;  ///< link factors the search was last asked on
  std::string why_not_;                        ///< a link drift not re-planned, for link_note
  std::set<std::tuple<std::int64_t, std::string, int, std::int64_t>> seen_;
  std::int64_t last_replan_iteration_ = -1000000;
  std::int64_t last_checked_ = -1;
};

}  // namespace sailor::app
