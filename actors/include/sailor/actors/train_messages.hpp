#pragma once
/// Wire messages of training through the actor runtime (no LibTorch here).
///
///   supervisor --training_job--> node agent (before the role_assignment of the same plan)
///   stage's training thread --train_report--> node agent --> supervisor (one per rank and
///   iteration)
///   supervisor --checkpoint_kept--> node agent --> node trainer (the newest checkpoint
///   complete across stages, which its writers keep)
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

#include "sailor/actors/inspect.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::actors {

/// protocol/'s structs (sailor/protocol/messages.hpp), sent as CAF messages as they are.
using protocol::checkpoint_kept;
using protocol::report_kind;
using protocol::train_report;
using protocol::training_job;

}  // namespace sailor::actors

// CAF 0.17 inspection (found by argument-dependent lookup). The plan of a training job is
// kept here although the wire leaves it behind: inside one process the job carries it.
namespace sailor::protocol {

SAILOR_INSPECT(training_job, x.plan_version, x.plan, x.model, x.iterations, x.seed, x.optimizer,
               x.schedule, x.torch_threads, x.timeout_ms, x.predicted_iteration_s, x.links,
               x.start_iteration, x.checkpoint_dir, x.checkpoint_every, x.restore_dir,
               x.restore_files, x.restore_holders, x.data, x.eval_every, x.eval_batches,
               x.peer_nodes, x.peer_addresses, x.keep_checkpoint_dirs, x.init_from)
SAILOR_INSPECT(train_report, x.plan_version, x.node, x.rank, x.stage, x.replica, x.tp_rank,
               x.iteration, x.loss, x.compute_s, x.send_wait_s, x.recv_wait_s, x.all_reduce_s,
               x.total_s, x.tokens, x.error, x.checkpoint_file, x.has_val_loss, x.val_loss, x.kind,
               x.phase, x.blamed_node, x.bytes, x.data_s, x.optimizer_s, x.checkpoint_s)
SAILOR_INSPECT(checkpoint_kept, x.plan_version, x.iterations, x.folder)

}  // namespace sailor::protocol

namespace sailor::config {

/// A link as the training job carries it (a bandwidth curve, if any, stays behind: the
/// constant bandwidth is used).
SAILOR_INSPECT(zone_link, x.from, x.to, x.latency_s, x.bandwidth_gbytes_per_s, x.egress_usd_per_gb)

SAILOR_INSPECT(optimizer_schedule, x.lr, x.min_lr, x.warmup_iterations, x.decay_iterations, x.beta1,
               x.beta2, x.weight_decay, x.grad_clip)

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
           x.tied_embeddings, x.learned_positions, arch, x.bias, x.norm_eps, x.rope_theta, x.gelu_tanh,
           restore);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_source& x) {
  int format = static_cast<int>(x.format);
  int tokenizer = static_cast<int>(x.tokenizer.kind);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.format = static_cast<data_format>(format);
    x.tokenizer.kind = static_cast<tokenizer_kind>(tokenizer);
    return caf::none;
  });
  return f(caf::meta::type_name("data_source"), x.path, format, x.validation_fraction, tokenizer,
           x.tokenizer.vocab, x.tokenizer.merges, x.tokenizer.model, restore);
}

}  // namespace sailor::config
