#pragma once
/// Wire messages of training through the actor runtime (no LibTorch here).
///
///   supervisor --training_job--> node agent (before the role_assignment of the same plan)
///   stage's training thread --train_report--> node agent --> supervisor (one per rank and
///   iteration)
///
/// The training job says everything a rank needs besides its role: the model, the whole
/// plan (the executor needs every rank's place), the number of iterations, the seed and the
/// optimizer. Ranks meet through the coordinator's rendezvous store (rendezvous.hpp), scoped
/// by the plan version: no folder is shared between nodes.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "sailor/actors/scheduler_api.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::actors {

/// What every rank of plan `plan_version` trains, and how.
struct training_job {
  std::int64_t plan_version = 0;
  config::plan plan;
  config::model_shape model;
  int iterations = 0;
  std::uint64_t seed = 1;
  std::string optimizer = "adamw";  ///< adamw or sgd
  double learning_rate = 1e-3;
  int torch_threads = 1;
  std::int64_t timeout_ms = 30000;  ///< bound on every wait for a peer
  double predicted_iteration_s = 0;  ///< the simulator's estimate for the plan (0: none)
  /// The cluster's links between the plan's zones: stage-to-stage transfers between zones are
  /// held for the link's latency and bandwidth (emulation on one machine). Empty: unshaped.
  std::vector<config::zone_link> links;
  /// Resume: the ranks load the checkpoint taken after this many iterations from
  /// `restore_dir` (written by any earlier plan) and run iterations start_iteration ..
  /// iterations - 1. 0: start afresh.
  int start_iteration = 0;
  /// Where this plan writes its plan-independent checkpoints (train/checkpoint.hpp), every
  /// `checkpoint_every` iterations, from replica 0 of every stage: a folder of this plan
  /// version alone, that every rank can reach. Empty: none.
  std::string checkpoint_dir;
  int checkpoint_every = 1;
  std::string restore_dir;
  /// The shard files of the checkpoint to restore (relative to each node's state folder) and,
  /// one per file, the shard server holding it: a rank fetches the files its node lacks.
  std::vector<std::string> restore_files;
  std::vector<std::string> restore_holders;
  /// The job's data (its path empty: the built-in synthetic stream). Every node reads the
  /// file at this path; the coordinator checked it before planning.
  config::data_source data;
  /// The schedule around `learning_rate` (its peak) and the optimizer's settings, as the job
  /// file gives them (config::optimizer_schedule; its lr is learning_rate).
  double min_learning_rate = -1;  ///< < 0: no decay
  int warmup_iterations = 0;
  int decay_iterations = 0;
  double beta1 = 0.9, beta2 = 0.999;
  double weight_decay = 0;
  double grad_clip = 1.0;  ///< 0: no clipping
  /// Every rank runs the validation pass after every eval_every-th iteration (0: never),
  /// averaged over eval_batches batches; the reports of that iteration carry its loss.
  int eval_every = 0;
  int eval_batches = 1;
  /// Every node with a role in this plan and, in the same order, the host:port of its shard
  /// server (which listens on the address the node advertised, as its collectives do): a rank
  /// checks that it reaches each before the rendezvous, so that a node its peers cannot reach
  /// is named instead of waited for.
  std::vector<std::string> peer_nodes;
  std::vector<std::string> peer_addresses;
  /// The job's checkpoint folders (relative to the state folders) a plan may still restore
  /// from: with a checkpoint_dir, a node removes the other plan folders beside it
  /// (checkpoints/<job>/v<N>) when the job arrives. Empty: none is removed.
  std::vector<std::string> keep_checkpoint_dirs;
};

/// What a train_report says (its `kind`).
enum class report_kind : std::int32_t {
  iteration = 0,          ///< the rank completed `iteration` (measurements)
  failed = 1,             ///< the rank stopped: `error` says why, `phase` where
  checkpoint_failed = 2,  ///< writing its checkpoint shard failed (`error`); it trains on
  reached = 3,            ///< the rank finished the start-up step `phase` ("setup", "restore")
  /// The rank's plan ended (a node lost, or released): its state after `iteration` completed
  /// iterations is held in its node's memory as `checkpoint_file` (`bytes` long), served by
  /// the node's shard server like a file; `error` set: no state kept (why).
  snapshot = 4,
};

/// One rank's measurements for one iteration (seconds), or its failure (`error` non-empty),
/// or a step of its start-up, by `kind`. A failure is its own kind, whatever its iteration:
/// a rank of a resumed plan that fails before its first iteration is still a failure.
struct train_report {
  std::int64_t plan_version = 0;
  std::string node;
  int rank = 0;
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;
  std::int64_t iteration = 0;
  double loss = 0;
  double compute_s = 0;
  double send_wait_s = 0;
  double recv_wait_s = 0;
  double all_reduce_s = 0;
  double total_s = 0;
  std::int64_t tokens = 0;
  std::string error;
  /// The newest checkpoint shard this rank has in place (relative to its node's state
  /// folder; empty: none). The node's shard server (its inventory address) serves it.
  std::string checkpoint_file;
  /// The validation loss after this iteration, when a validation pass ran (eval_every).
  bool has_val_loss = false;
  double val_loss = 0;
  std::int32_t kind = static_cast<std::int32_t>(report_kind::iteration);  ///< a report_kind
  /// failed: the step it failed in ("setup": reaching peers and the rendezvous, "restore":
  /// fetching and loading the checkpoint, "iteration"); reached: the step done.
  std::string phase;
  /// failed: the node the failure is laid on (a peer this rank could not reach at its
  /// advertised address), or empty when the rank cannot tell.
  std::string blamed_node;
  /// snapshot: the size of the shard held; reached "restore": the bytes this rank's node
  /// fetched over the transport for the restore.
  std::int64_t bytes = 0;

  report_kind what() const {
    if (kind == static_cast<std::int32_t>(report_kind::iteration) && !error.empty())
      return report_kind::failed;  // a sender that predates `kind`
    return static_cast<report_kind>(kind);  // a value not listed is ignored by readers
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, training_job& x) {
  return f(caf::meta::type_name("training_job"), x.plan_version, x.plan, x.model, x.iterations,
           x.seed, x.optimizer, x.learning_rate, x.torch_threads, x.timeout_ms,
           x.predicted_iteration_s, x.links, x.start_iteration, x.checkpoint_dir,
           x.checkpoint_every, x.restore_dir, x.restore_files, x.restore_holders, x.data,
           x.min_learning_rate, x.warmup_iterations, x.decay_iterations, x.beta1, x.beta2,
           x.weight_decay, x.grad_clip, x.eval_every, x.eval_batches, x.peer_nodes,
           x.peer_addresses, x.keep_checkpoint_dirs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, train_report& x) {
  return f(caf::meta::type_name("train_report"), x.plan_version, x.node, x.rank, x.stage,
           x.replica, x.tp_rank, x.iteration, x.loss, x.compute_s, x.send_wait_s, x.recv_wait_s,
           x.all_reduce_s, x.total_s, x.tokens, x.error, x.checkpoint_file, x.has_val_loss,
           x.val_loss, x.kind, x.phase, x.blamed_node, x.bytes);
}

}  // namespace sailor::actors

namespace sailor::config {

/// A link as the training job carries it (a bandwidth curve, if any, stays behind: the
/// constant bandwidth is used).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, zone_link& x) {
  return f(caf::meta::type_name("zone_link"), x.from, x.to, x.latency_s, x.bandwidth_gbytes_per_s,
           x.egress_usd_per_gb);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_shape& x) {
  int precision = static_cast<int>(x.precision);
  int arch = static_cast<int>(x.arch);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.precision = static_cast<dtype>(precision);
    x.arch = static_cast<architecture>(arch);
    return caf::none;
  });
  return f(caf::meta::type_name("model_shape"), x.name, x.sailor_name, x.num_layers, x.hidden,
           x.heads, x.kv_heads, x.ffn_hidden, x.gated_mlp, x.sequence, x.vocabulary, precision,
           x.tied_embeddings, x.learned_positions, arch, x.bias, x.norm_eps, x.rope_theta,
           restore);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_source& x) {
  int format = static_cast<int>(x.format);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.format = static_cast<data_format>(format);
    return caf::none;
  });
  return f(caf::meta::type_name("data_source"), x.path, format, x.validation_fraction, restore);
}

}  // namespace sailor::config
