#pragma once
// The job's figures for monitoring, from what the supervisor publishes on its status board:
// the coordinator's dashboard serves them at /metrics in Prometheus' text exposition format
// (0.0.4, written here: no client library), and `--metrics-jsonl FILE` appends them as one
// JSON line per completed iteration. Both carry the same figures under the same names.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/status_board.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

/// The job at one moment. Optional figures are absent until known.
struct job_figures {
  std::int64_t plan_version = 0;
  std::int64_t iteration = -1;  ///< the newest completed iteration, 0-based (-1: none)
  std::int64_t iterations_completed = 0;
  std::int64_t iterations_total = 0;  ///< 0: not training
  std::optional<double> loss;         ///< of the newest iteration
  std::optional<double> tokens_per_s;
  std::optional<double> measured_iteration_s;
  std::optional<double> predicted_iteration_s;  ///< the running plan's prediction
  std::map<std::string, int> nodes_by_state;    ///< joined, assigned, idle, ready (0s too)
  actors::board_counters counters;              ///< re-plans and recoveries by cause
  /// The simulator's estimate of the bytes the running plan sends between zones per iteration
  /// (activations between stages, gradient all-reduces), as our runtime sends them.
  std::optional<double> cross_zone_bytes_per_iteration;
  /// The newest iteration's cost: the plan's GPUs at the cluster's prices for its measured
  /// time, plus the estimated egress between zones. Absent without prices.
  std::optional<double> usd_per_iteration;
  std::optional<std::int64_t> checkpoint_behind_iterations;  ///< plans that write checkpoints
};

/// Reads the figures off a board; the plan's cross-zone estimate is computed once per plan.
/// Any thread.
class job_metrics {
public:
  job_metrics(std::shared_ptr<const actors::status_board> board, config::cluster cluster,
              config::model_shape model);
  job_figures figures() const;

private:
  struct plan_traffic {
    std::optional<double> cross_zone_bytes, egress_usd;
  };
  plan_traffic traffic_of(const actors::board_snapshot& s) const;

  std::shared_ptr<const actors::status_board> board_;
  config::cluster cluster_;
  config::model_shape model_;
  mutable std::mutex mu_;  // the cache below
  mutable std::int64_t traffic_version_ = -1;
  mutable plan_traffic traffic_;
};

/// Prometheus' text exposition format 0.0.4 (Content-Type text/plain; version=0.0.4).
std::string prometheus_text(const job_figures& f);

/// The same figures as one JSON object (a line of --metrics-jsonl).
nlohmann::json figures_json(const job_figures& f);

/// `--metrics-jsonl FILE`: appends one line of figures_json per completed iteration (to an
/// existing file too: a resumed job continues it). A write that fails is told once on stderr;
/// training goes on.
class metrics_jsonl {
public:
  static result<std::unique_ptr<metrics_jsonl>> open(const std::string& path,
                                                      std::shared_ptr<const job_metrics> metrics);
  ~metrics_jsonl();
  metrics_jsonl(const metrics_jsonl&) = delete;
  metrics_jsonl& operator=(const metrics_jsonl&) = delete;
  /// Appends the figures now (the supervisor's on_iteration: the board has the iteration).
  void append();

private:
  metrics_jsonl(std::FILE* file, std::string path, std::shared_ptr<const job_metrics> metrics);
  std::FILE* file_;
  std::string path_;
  std::shared_ptr<const job_metrics> metrics_;
  bool failed_ = false;
};

/// Chains `file->append()` after the supervisor's on_iteration (nothing when `file` is null).
void append_figures_on_iteration(actors::supervisor_options& options,
                                 std::shared_ptr<metrics_jsonl> file);

/// Opens --metrics-jsonl `path` on `board` ("" : none, null); the error names the option.
result<std::shared_ptr<metrics_jsonl>> open_metrics_jsonl(
  const std::string& path, std::shared_ptr<const actors::status_board> board,
  const config::cluster& cluster, const config::model_shape& model);

}  // namespace sailor::app
