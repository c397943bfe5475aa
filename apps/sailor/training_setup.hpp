#pragma once
// What `sailor demo` and `sailor coordinator --train` share: filling each plan's training job,
// resuming from the newest complete checkpoint of any earlier plan.

#include <cstdint>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sailor/actors/checkpoint_holdings.hpp"
#include "sailor/config/error.hpp"
#include "sailor/actors/train_messages.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

/// What every plan's training job holds besides the plan.
struct training_settings {
  config::model_shape model;
  config::job job;                 ///< seed, optimizer
  /// The coordinator's own folder for the job. Checkpoints are not here: each node writes
  /// its shards under its own --state-dir (the jobs name folders relative to it) and reports
  /// them; the supervisor resumes from what the nodes still in the job hold.
  std::string work_dir;
  int iterations = 0;
  int checkpoint_every = 1;        ///< 0: no checkpoints on disk (a re-plan resumes from
                                   ///< the ranks' memory only)
  std::int64_t timeout_ms = 30000; ///< bound on every wait for a peer
  int torch_threads = 0;  ///< 0: each node gives its ranks its cores (sailor-node --threads)
  std::vector<config::zone_link> links;  ///< emulated links between zones (empty: none)
  /// A coordinator that continues a job (its journal): until its first iteration, plans
  /// resume from no state newer than the iterations the journal holds in a row (the ranks
  /// may have completed one more whose loss never reached the journal: it is run again, so
  /// that the loss curve has no hole). Negative, or null: no bound.
  std::shared_ptr<std::atomic<int>> journal_bound;
};

/// Why `plan` cannot train `model` on the devices of `cluster`'s catalog (the simulator's
/// memory estimate for CPU devices; when the simulator cannot estimate, 16 bytes per parameter
/// of the largest stage: weights, gradients and two AdamW states in fp32), or "" when it fits.
std::string memory_refusal(const config::model_shape& model, const config::plan& plan,
                           const config::cluster& cluster, const config::job& job);

/// Why `plan` breaks the job's cost constraints (constraints.max_cost_per_iteration_usd and
/// max_cost_per_hour_usd: hard limits, as for `sailor plan`; the error names the field), or
/// none when it keeps them, the job sets none, or the simulator cannot price the plan. The cost is the simulator's for the plan's devices and links (the cluster's
/// prices), at `iteration_s` per iteration when > 0 (the prediction the plan runs with).
status cost_refusal(const config::model_shape& model, const config::plan& plan,
                    const config::cluster& cluster, const config::job& job, double iteration_s);

/// The job's name in the nodes' state folders (checkpoints/<key>/v<plan>/): a hash of the
/// coordinator's train folder and the model, so that a coordinator started again on its
/// folder resumes, and another job never does from these shards.
std::string job_key(const training_settings& s);

/// Refuses, before anything is planned, what the nodes could not train: an architecture or
/// option models/ does not implement, and a job's data file that is missing or unreadable,
/// holds a token id at or above the model's vocabulary (or more text symbols than it), is too
/// short for one sequence, or has no validation part while eval_every asks for one. The error
/// names the file and the field (`job_file` for the job's own fields).
status check_training_inputs(const config::model_shape& model, const config::job& job,
                             const std::string& job_file);

/// The job file's settings every rank needs: seed, optimizer and its schedule, data (its
/// path made absolute), validation passes.
void fill_job_settings(actors::training_job& tj, const config::job& job);

/// Fills `tj` (its plan and version set by the supervisor) from `s`, resuming from the
/// newest complete checkpoint of an earlier plan that the nodes in the job hold (`held`).
/// Returns false when there is nothing left to train (the checkpoint already holds every
/// iteration).
bool fill_training_job(actors::training_job& tj, const training_settings& s,
                       const actors::checkpoint_holdings& held);

}  // namespace sailor::app
