#pragma once
/// The coordinator's journal of a training job (`--train-dir/journal`): what a coordinator
/// restarted on the same folder must not forget. Append-only, one record per line:
///
///     <CRC-32 of the JSON text, 8 hex digits> <JSON object>\n
///
/// Records ("t"): "job" (first, once: the job's key, model and the job token's digest),
/// "plan" (each plan version with its nodes, the plan as YAML and where it resumes),
/// "iteration" (each completed iteration: loss, validation loss, time, tokens),
/// "recovery" (each recovery record), "validation" (the starting weights' validation loss),
/// "checkpoint" (each checkpoint the nodes were told to keep: it outlives any one stage).
///
/// Durability: plan and recovery records are written and fsync'd before the coordinator acts
/// on them; iterations are written as they complete (a killed process loses none of them)
/// and fsync'd at most once a second (a machine that loses power loses up to a second).
/// Reading: a last line cut short (no newline, or a torn record) is the end of the journal
/// and is cut off before the next append; any other line that does not parse makes the
/// whole journal refused, naming the file and the line, and nothing is written to it.
/// No LibTorch.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

/// Who a journal belongs to: a journal of another model or another job token is refused.
struct journal_identity {
  /// The job's checkpoint folder name when the journal was started: told, not compared (it
  /// follows the train folder's path, and `sailor train --resume` takes a moved run).
  std::string job;
  std::string model;         ///< the model's name
  std::string token_digest;  ///< comm::token_digest of the job token (empty: no token)
};

/// One plan version as issued.
struct journal_plan {
  std::int64_t version = 0;
  int start_iteration = 0;         ///< iterations completed before it (where it resumed)
  std::vector<std::string> nodes;  ///< the nodes with roles
  std::string plan_yaml;           ///< config::to_yaml of the plan
};

/// What a journal holds, read back.
struct journal_contents {
  std::optional<journal_identity> identity;
  std::vector<journal_plan> plans;
  /// Completed iterations by iteration number; an iteration run again after a recovery
  /// replaces the earlier record of it.
  std::vector<iteration_record> iterations;
  std::vector<recovery_record> recoveries;
  std::optional<double> initial_val_loss;
  int checkpoint_iterations = 0;  ///< the newest checkpoint kept (0: none)
  std::string checkpoint_folder;  ///< its folder (relative to the nodes' state folders)
  std::size_t records = 0;        ///< whole records read
  std::uintmax_t whole_bytes = 0; ///< the bytes of those records (the rest was cut short)
  bool cut = false;               ///< the file ended in a record cut short

  /// The newest plan version issued (0: none).
  std::int64_t plan_version() const { return plans.empty() ? 0 : plans.back().version; }
  /// Iterations completed in a row from 0 (what the job has done, as far as it knows).
  int completed() const;
};

/// Reads the journal at `path` (a missing file is an empty journal).
result<journal_contents> read_journal(const std::string& path);

/// The journal a coordinator writes. Not thread-safe: the supervisor's callbacks call it,
/// on the supervisor's thread.
class job_journal {
public:
  /// Opens `path` for `who`: reads what it holds into `previous` (refused when it does not
  /// parse or belongs to another job, the file untouched), cuts a record cut short off its
  /// end, and starts it with the job's record when it is new.
  static result<std::unique_ptr<job_journal>> open(const std::string& path,
                                                   const journal_identity& who,
                                                   journal_contents& previous);
  ~job_journal();
  job_journal(const job_journal&) = delete;
  job_journal& operator=(const job_journal&) = delete;

  status plan(const journal_plan& p);  ///< fsync'd before it returns
  status iteration(const iteration_record& r);
  status recovery(const recovery_record& r);  ///< fsync'd
  status initial_validation(double val_loss);
  status checkpoint(int iterations, const std::string& folder);
  /// Writes what is buffered and fsyncs.
  status sync();
  const std::string& path() const { return path_; }

private:
  job_journal(std::string path, int fd) : path_{std::move(path)}, fd_{fd} {}
  status append(const std::string& json, bool durable);

  std::string path_;
  int fd_ = -1;
  std::chrono::steady_clock::time_point last_sync_{};
  bool dirty_ = false;
};

}  // namespace sailor::actors
