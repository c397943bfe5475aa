#pragma once
/// status_board: what the job supervisor publishes for readers on other threads (the
/// coordinator's dashboard). The supervisor writes; readers copy.
///
///   supervisor (actor thread) --publish / add_event / add_report / add_iteration--> board
///   HTTP threads              --snapshot / metrics / events / reports-->            copies
///
/// Every lock is held for a pointer swap or a bounded copy, never across I/O: a slow or
/// stalled reader holds at most a reference to an immutable snapshot, so it cannot stall the
/// supervisor. Every log is bounded (the oldest entries are dropped).
///
/// Events arrive as the supervisor's text lines (the same ones `sailor status` prints); the
/// board classifies them (join, lost, preempted, plan...) and adds what only a reader across
/// time can tell: how long after a loss the next plan completed its first iteration.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/train_progress.hpp"

namespace sailor::actors {

/// One entry of the event list.
struct board_event {
  std::int64_t seq = 0;      ///< 1, 2, ... in the order recorded
  std::int64_t unix_ms = 0;  ///< when the supervisor recorded it
  /// join, lost, preempted, refused, planning, plan, resume, ready, no_plan, failure,
  /// training, other
  std::string kind;
  std::string node;          ///< the node it is about, if any
  std::int64_t plan_version = 0;  ///< the plan it names (plan, resume), else the current one
  std::string reason;        ///< plan: why it was made
  double recovery_s = -1;    ///< plan after a loss: from the loss to its first iteration
  std::string text;          ///< the supervisor's line
};

/// One completed iteration of the loss curve.
struct board_point {
  std::int64_t iteration = 0;
  std::int64_t plan_version = 0;
  std::int64_t unix_ms = 0;
  iteration_record record;
  double predicted_s = 0;  ///< the plan's predicted iteration time (0: none)
};

/// Where a plan's training started on the iteration axis.
struct board_plan_mark {
  std::int64_t plan_version = 0;
  std::int64_t first_iteration = 0;
  std::int64_t unix_ms = 0;
  std::string reason;
  double recovery_s = -1;
};

/// One rank's report as it arrived.
struct board_rank_report {
  train_report report;
  std::int64_t arrival_unix_ms = 0;
};

/// The supervisor's state at one moment.
struct board_snapshot {
  cluster_status status;
  std::optional<config::plan> plan;
  double predicted_s = 0;  ///< of the training plan (0: none)
  std::chrono::steady_clock::time_point published{};
};

/// Classifies one of the supervisor's event lines (see status_board).
board_event classify_event(const std::string& text);

/// Why a plan was made, in a word (the cause label of /metrics): node_lost, node_joined,
/// drift, scheduler, restore_failed, non_finite (an iteration was not finite), startup_failed,
/// start (quorum or settle time), other.
std::string plan_cause(const std::string& planning_reason);

/// What /metrics counts for the whole job; unlike the event log, never dropped.
struct board_counters {
  std::map<std::string, std::int64_t> replans;     ///< plans after the first, by plan_cause
  std::map<std::string, std::int64_t> recoveries;  ///< by recovery_record::cause (loss, replan)
  double last_recovery_s = -1;                     ///< noticed -> first iteration (-1: none)
};

class status_board {
public:
  struct limits {
    std::size_t events = 256;
    std::size_t points = 100000;
    std::size_t reports = 4096;
    std::size_t marks = 256;
  };
  status_board();
  explicit status_board(limits l);

  // -- writer side: the supervisor ------------------------------------------------------
  void publish(board_snapshot s);
  /// Planning started for `reason`: the next plan event carries it.
  void planning(const std::string& reason);
  void add_event(const std::string& text, std::int64_t current_plan_version);
  void add_report(const train_report& r);
  /// A completed iteration. An iteration at or before the newest one rewinds the curve (a
  /// plan resumed from an earlier checkpoint): the later points are dropped and curve_id
  /// changes.
  void add_iteration(const iteration_record& r, std::int64_t plan_version, double predicted_s);
  /// A recovery completed (the supervisor's recovery_record: its cause and total time).
  void add_recovery(const std::string& cause, double total_s);

  // -- reader side: any thread ----------------------------------------------------------
  /// The newest snapshot (never null: empty before the first publish).
  std::shared_ptr<const board_snapshot> snapshot() const;
  struct metrics_page {
    std::vector<board_point> points;  ///< iteration >= since, oldest first, at most `limit`
    std::vector<board_plan_mark> plans;
    std::int64_t curve_id = 0;        ///< changes whenever the curve is rewound
    std::int64_t newest = -1;         ///< the newest iteration on the curve (-1: none)
    bool more = false;                ///< points past the limit were left out
  };
  metrics_page metrics(std::int64_t since, std::size_t limit) const;
  std::vector<board_event> events() const;
  /// Rank reports of the newest `iterations` iterations.
  std::vector<board_rank_report> reports(std::int64_t iterations) const;
  board_counters counters() const;

private:
  limits limits_;
  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const board_snapshot> snapshot_;
  mutable std::mutex mu_;  // everything below
  std::deque<board_event> events_;
  std::int64_t next_seq_ = 1;
  std::string planning_reason_;
  std::string planning_cause_;
  std::string pending_cause_;  ///< told by an event line before the planning (drift, scheduler)
  bool planned_ = false;       ///< a plan event was seen: the next ones are re-plans
  board_counters counters_;
  std::int64_t loss_unix_ms_ = 0;  ///< an unrecovered loss (0: none)
  std::deque<board_point> points_;
  std::deque<board_plan_mark> marks_;
  std::int64_t curve_id_ = 0;
  std::deque<board_rank_report> reports_;
};

}  // namespace sailor::actors
