#pragma once
// Private to node training: how a rank starts (its executor options are options_for's, in
// node_training.hpp, defined here), and a job that starts afresh from a model trained elsewhere
// (training_job::init_from, train/pretrained.hpp). Each rank loads its own slice before its
// first iteration; with a validation pass configured (eval_every), the ranks then measure the
// weights they start from, so that the user sees where fine-tuning began. No LibTorch here.

#include <optional>
#include <string>

#include "sailor/actors/train_progress.hpp"
#include "sailor/config/error.hpp"
#include "sailor/train/executor.hpp"

namespace sailor::train {

/// Whether the ranks of `job` load init_from: a job that starts at iteration 0 and names one.
bool starts_from_pretrained(const actors::training_job& job);

/// Loads the rank's slice of `job.init_from` into `exec`; the error says which file and
/// tensor refused it.
status load_init_from(const actors::training_job& job, stage_executor& exec);

/// The validation loss of the starting weights (every rank of the plan calls it together)
/// as the report that carries it, from `base`: kind reached, phase "validation", iteration 0.
/// Nothing when the job runs no validation pass or starts from its own seed.
std::optional<result<actors::train_report>> initial_validation(const actors::training_job& job,
                                                               const actors::train_report& base,
                                                               stage_executor& exec);

}  // namespace sailor::train
