#pragma once
// Each message's fields next to its schema struct's, written once: the encoder
// (codec_encode.cpp) and the decoder (codec_decode.cpp) both walk these lists, and
// codec_fields.test.cpp checks them against the schema (every field of every struct mapped,
// every name in the schema, every member of the schema's type).
//
// fields(f, v) calls f("schemaName", member) for each field of the schema struct, in the
// schema's order (the encoder allocates in this order: it fixes the layout of the bytes). A
// member is a number, a bool, a string (Text), a std::vector<char> (Data), a std::vector of
// any of these, a struct with its own fields(), a std::optional of one, or one of the
// adapters below for what the schema cannot say alone.

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <type_traits>

#include "codec_internal.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol::detail {

namespace bounds = wire_bounds;

/// V is T or const T: one field list serves the encoder (const) and the decoder.
template <class V, class T>
concept like = std::same_as<std::remove_const_t<V>, T>;

// -- adapters ---------------------------------------------------------------------------------

/// Text cut to `max` bytes on the way out (protocol/limits.hpp), read as it comes.
template <class S>
struct clipped {
  S& text;
  std::size_t max;
};
template <class S>
clipped<S> clip(S& text, std::size_t max) { return {text, max}; }

/// A list of at most `max` elements on the way out, read as it comes.
template <class V>
struct bounded {
  V& list;
  std::size_t max;
};
template <class V>
bounded<V> at_most(V& list, std::size_t max) { return {list, max}; }

/// An enum through its table (codec_internal.hpp). A value this build does not know is
/// refused as "unknown <what> <value>"; with no `what` it reads as the table's first.
template <class A, class B, class M>
struct wire_enum {
  std::span<const enum_pair<A, B>> table;
  M& value;
  const char* what;
};
template <class A, class B, std::size_t N, class M>
wire_enum<A, B, M> enum_of(const enum_pair<A, B> (&table)[N], M& value,
                           const char* what = nullptr) {
  return {table, value, what};
}

/// The Bool that says whether an optional member is there (the member follows it).
template <class O>
struct presence {
  O& optional;
};
template <class O>
presence<O> present(O& optional) { return {optional}; }

/// A role inside its assignment: only its place in the plan travels; the decoder fills in
/// the rest from the plan beside it and refuses a place that is not in it.
template <class R>
struct role_place {
  R& role;
};
template <class R>
void fields(auto& f, role_place<R> p) {
  f("stage", p.role.stage)("replica", p.role.replica)("tpRank", p.role.tp_rank)(
    "device", p.role.device);
}
/// The roles of an assignment, each as its role_place (a partial StageRole by design).
template <class V>
struct place_list {
  V& roles;
};
template <class V>
place_list<V> places(V& roles) { return {roles}; }

// -- nodes ------------------------------------------------------------------------------------

void fields(auto& f, like<device_info> auto& v) {
  f("index", v.index)("kind", v.kind)("memoryBytes", v.memory_bytes);
}

void fields(auto& f, like<node_inventory> auto& v) {
  f("name", v.name)("zone", v.zone)("gpuType", v.gpu_type)("host", v.host);
  f("devices", v.devices)("address", v.address)("checkpoints", v.checkpoints);
}

void fields(auto& f, like<join_request> auto& v) {
  f("version", v.version)("inventory", v.inventory)("lastPlanVersion", v.last_plan_version);
}

void fields(auto& f, like<join_accepted> auto& v) {
  f("node", v.node)("zoneActor", v.zone_actor);
  f("heartbeatIntervalMs", v.heartbeat_interval_ms)("heartbeatTimeoutMs", v.heartbeat_timeout_ms);
}

void fields(auto& f, like<join_refused> auto& v) {
  f("reason", clip(v.reason, bounds::reason_bytes))("code", enum_of(refuse_reasons, v.code));
}

void fields(auto& f, like<heartbeat> auto& v) { f("node", v.node)("seq", v.seq); }

// -- plans and roles --------------------------------------------------------------------------

void fields(auto& f, like<config::replica> auto& v) {
  f("gpuType", v.gpu_type)("zone", v.zone)("tp", v.tp)("nodes", v.nodes)("devices", v.devices);
}

void fields(auto& f, like<config::stage_plan> auto& v) {
  f("firstLayer", v.first_layer)("numLayers", v.num_layers)("recompute", v.recompute);
  f("replicas", v.replicas);
}

void fields(auto& f, like<config::plan_estimate> auto& v) {  // its notes stay in the process
  f("iterationTimeS", v.iteration_time_s)("throughputItersPerS", v.throughput_iters_per_s);
  f("costPerIterationUsd", v.cost_per_iteration_usd)("costPerHourUsd", v.cost_per_hour_usd);
  f("peakMemoryBytes", v.peak_memory_bytes);
}

void fields(auto& f, like<config::local_sgd_plan::region> auto& v) {
  f("name", v.name)("zones", v.zones);
}

void fields(auto& f, like<config::local_sgd_plan> auto& v) {
  f("innerSteps", v.inner_steps)("regions", v.regions);
}

void fields(auto& f, like<config::plan> auto& v) {
  f("microBatch", v.micro_batch)("globalBatch", v.global_batch)("stages", v.stages);
  f("hasEstimate", present(v.estimate))("estimate", v.estimate);
  f("hasLocalSgd", present(v.local_sgd))("localSgd", v.local_sgd);
}

void fields(auto& f, like<stage_role> auto& v) {
  f("planVersion", v.plan_version)("stage", v.stage)("replica", v.replica)("tpRank", v.tp_rank);
  f("tp", v.tp)("device", v.device)("firstLayer", v.first_layer)("numLayers", v.num_layers);
  f("microBatch", v.micro_batch)("numStages", v.num_stages)("gpuType", v.gpu_type);
  f("zone", v.zone);
}

void fields(auto& f, like<role_assignment> auto& v) {
  f("planVersion", v.plan_version)("roles", places(v.roles))("plan", v.plan);
}

void fields(auto& f, like<stage_ready> auto& v) { f("node", v.node)("role", v.role); }

void fields(auto& f, like<stage_failed> auto& v) {
  f("node", v.node)("role", v.role)("reason", clip(v.reason, bounds::reason_bytes));
}

void fields(auto& f, like<preemption_notice> auto& v) {
  f("node", v.node)("reason", clip(v.reason, bounds::reason_bytes))("secondsLeft", v.seconds_left);
}

void fields(auto& f, like<shutdown_notice> auto& v) {
  f("reason", clip(v.reason, bounds::reason_bytes))("kind", enum_of(shutdown_kinds, v.kind, "shutdown kind"));
}

// -- status -----------------------------------------------------------------------------------

void fields(auto& f, like<status_request> auto& v) { f("unused", v.unused); }

void fields(auto& f, like<peer_refused> auto& v) {
  f("peer", v.peer)("reason", v.reason)("unixMs", v.unix_ms);
}

void fields(auto& f, like<node_status> auto& v) {
  f("inventory", v.inventory)("state", v.state)("heartbeatAgeMs", v.heartbeat_age_ms);
  f("roles", v.roles)("readyRoles", v.ready_roles);
}

void fields(auto& f, like<cluster_status> auto& v) {
  f("phase", v.phase)("planVersion", v.plan_version)("quorum", v.quorum)("stages", v.stages);
  f("replicas", v.replicas)("rolesTotal", v.roles_total)("rolesReady", v.roles_ready);
  f("planSummary", v.plan_summary)("zones", v.zones)("nodes", v.nodes)("events", v.events);
  f("refusals", v.refusals)("trainingCompleted", v.training_completed);
  f("trainingTotal", v.training_total)("trainingLoss", v.training_loss);
  f("trainingSummary", v.training_summary)("valIterations", v.val_iterations);
  f("valLosses", v.val_losses)("checkpointIterations", v.checkpoint_iterations);
  f("checkpointBehind", v.checkpoint_behind)("checkpointAgeS", v.checkpoint_age_s);
  f("checkpointEvery", v.checkpoint_every)("checkpointWarning", v.checkpoint_warning);
}

// -- training ---------------------------------------------------------------------------------

void fields(auto& f, like<config::model_shape> auto& v) {
  f("name", v.name)("sailorName", v.sailor_name)("numLayers", v.num_layers);
  f("hidden", v.hidden)("heads", v.heads)("kvHeads", v.kv_heads)("ffnHidden", v.ffn_hidden);
  f("gatedMlp", v.gated_mlp)("sequence", v.sequence)("vocabulary", v.vocabulary);
  f("precision", enum_of(precisions, v.precision, "precision"));
  f("tiedEmbeddings", v.tied_embeddings)("learnedPositions", v.learned_positions);
  f("arch", enum_of(architectures, v.arch, "architecture"));
  f("bias", v.bias)("normEps", v.norm_eps)("ropeTheta", v.rope_theta)("geluTanh", v.gelu_tanh);
}

void fields(auto& f, like<config::zone_link> auto& v) {  // the constant figures: no curve
  f("from", v.from)("to", v.to)("latencyS", v.latency_s);
  f("bandwidthGbytesPerS", v.bandwidth_gbytes_per_s)("egressUsdPerGb", v.egress_usd_per_gb);
}

void fields(auto& f, like<config::data_source> auto& v) {
  f("path", v.path)("format", enum_of(data_formats, v.format, "data format"));
  f("validationFraction", v.validation_fraction);
  f("tokenizer", enum_of(tokenizer_kinds, v.tokenizer.kind, "tokenizer"));
  f("tokenizerVocab", v.tokenizer.vocab)("tokenizerMerges", v.tokenizer.merges);
  f("tokenizerModel", v.tokenizer.model);
}

// Its `plan` does not travel: the role assignment of the same plan version carries it. Its
// schedule (one struct here) travels as flat fields of TrainingJob, where the schema has them.
void fields(auto& f, like<training_job> auto& v) {
  auto& s = v.schedule;
  f("planVersion", v.plan_version)("model", v.model)("iterations", v.iterations)("seed", v.seed);
  f("optimizer", v.optimizer)("learningRate", s.lr);
  f("torchThreads", v.torch_threads)("timeoutMs", v.timeout_ms);
  f("predictedIterationS", v.predicted_iteration_s)("links", v.links);
  f("startIteration", v.start_iteration)("checkpointDir", v.checkpoint_dir);
  f("checkpointEvery", v.checkpoint_every)("restoreDir", v.restore_dir);
  f("restoreFiles", v.restore_files)("restoreHolders", v.restore_holders)("data", v.data);
  f("minLearningRate", s.min_lr)("warmupIterations", s.warmup_iterations);
  f("decayIterations", s.decay_iterations)("beta1", s.beta1)("beta2", s.beta2);
  f("weightDecay", s.weight_decay)("gradClip", s.grad_clip)("evalEvery", v.eval_every);
  f("evalBatches", v.eval_batches)("peerNodes", v.peer_nodes);
  f("peerAddresses", v.peer_addresses)("keepCheckpointDirs", v.keep_checkpoint_dirs);
  f("initFrom", v.init_from)("outer", v.outer);
}

// The sync/diloco choice and inner_steps do not travel: the plan's local_sgd says both.
void fields(auto& f, like<config::data_parallel_options> auto& v) {
  f("optimizer", enum_of(outer_optimizers, v.outer_optimizer, "outer optimizer"));
  f("lr", v.outer_lr)("momentum", v.outer_momentum);
  f("compression", enum_of(delta_compressions, v.compression, "compression"));
  f("fragments", v.fragments)("overlapSteps", v.overlap_steps);
}

void fields(auto& f, like<train_report> auto& v) {
  f("planVersion", v.plan_version)("node", v.node)("rank", v.rank)("stage", v.stage);
  f("replica", v.replica)("tpRank", v.tp_rank)("iteration", v.iteration)("loss", v.loss);
  f("computeS", v.compute_s)("sendWaitS", v.send_wait_s)("recvWaitS", v.recv_wait_s);
  f("allReduceS", v.all_reduce_s)("totalS", v.total_s)("tokens", v.tokens);
  f("error", clip(v.error, bounds::reason_bytes))("checkpointFile", v.checkpoint_file);
  f("hasValLoss", v.has_val_loss)("valLoss", v.val_loss)("kind", v.kind);
  f("phase", clip(v.phase, bounds::word_bytes))("blamedNode", v.blamed_node)("bytes", v.bytes);
  f("dataS", v.data_s)("optimizerS", v.optimizer_s)("checkpointS", v.checkpoint_s);
}

void fields(auto& f, like<checkpoint_kept> auto& v) {
  f("planVersion", v.plan_version)("iterations", v.iterations)("folder", v.folder);
}

void fields(auto& f, like<store_request> auto& v) {
  f("requestId", v.request_id)("planVersion", v.plan_version)("key", v.key)("set", v.set);
  f("value", v.value)("timeoutMs", v.timeout_ms)("node", v.node);
}

void fields(auto& f, like<store_reply> auto& v) {
  f("requestId", v.request_id)("found", v.found)("value", v.value);
  f("error", clip(v.error, bounds::reason_bytes));
}

// -- a scheduler in its own process (scheduler_messages.hpp) ----------------------------------

void fields(auto& f, like<placement_rule> auto& v) {
  f("kind", enum_of(placement_kinds, v.kind, "placement rule"))("node", v.node)("stage", v.stage);
}

void fields(auto& f, like<plan_request> auto& v) {
  f("requestId", v.request_id)("reason", v.reason)("nodes", v.nodes);
  f("hasCurrent", v.has_current)("current", v.current)("rules", v.rules);
  f("objective", v.objective)("modelLayers", v.model_layers);
}

void fields(auto& f, like<plan_reply> auto& v) {
  f("requestId", v.request_id)("ok", v.ok)("plan", v.plan)("error", v.error);
}

void fields(auto& f, like<availability_event> auto& v) {
  f("kind", enum_of(availability_kinds, v.kind, "availability kind"))("node", v.node);
  f("reason", v.reason)("deadlineMs", v.deadline_ms);
}

void fields(auto& f, like<iteration_telemetry> auto& v) {
  f("planVersion", v.plan_version)("iteration", v.iteration)("node", v.node);
  f("stage", v.stage)("replica", v.replica)("measuredS", v.measured_s);
  f("computeS", v.compute_s)("waitS", v.wait_s)("allReduceS", v.all_reduce_s);
  f("predictedS", v.predicted_s)("loss", v.loss);
}

void fields(auto& f, like<plan_applied> auto& v) {
  f("planVersion", v.plan_version)("plan", v.plan)("by", v.by);
}

void fields(auto& f, like<plan_refused> auto& v) {
  f("requestId", v.request_id)("reason", v.reason);
}

void fields(auto& f, like<replan_finished> auto& v) {
  f("planVersion", v.plan_version)("reason", v.reason)("recoveryS", v.recovery_s);
}

void fields(auto& f, like<scheduler_hello> auto& v) { f("name", v.name); }

void fields(auto& f, like<scheduler_request> auto& v) {
  f("requestId", v.request_id)("kind", enum_of(scheduler_commands, v.kind, "scheduler request"));
  f("node", v.node)("reason", v.reason);
  f("deadlineMs", v.deadline_ms)("stage", v.stage)("key", v.key)("value", v.value);
}

void fields(auto& f, like<scheduler_reply> auto& v) {
  f("requestId", v.request_id)("accepted", v.accepted)("reason", v.reason);
}

// -- link probes between nodes (probe_messages.hpp) -------------------------------------------

void fields(auto& f, like<link_probe_request> auto& v) {
  f("probeId", v.probe_id)("kind", v.kind)("peer", v.peer)("peerZone", v.peer_zone);
  f("address", v.address)("links", v.links)("timeoutMs", v.timeout_ms);
}

void fields(auto& f, like<link_probe_result> auto& v) {
  f("probeId", v.probe_id)("node", v.node)("error", clip(v.error, bounds::reason_bytes));
  f("address", clip(v.address, bounds::name_bytes))("latencyS", v.latency_s);
  f("sizes", at_most(v.sizes, bounds::probe_sizes));
  f("bytesPerS", at_most(v.bytes_per_s, bounds::probe_sizes));
  f("elapsedS", v.elapsed_s);
}

// -----------------------------------------------------------------------------------------------

/// A visitor that does nothing: what `mapped` asks fields() to accept.
struct any_field {
  template <class T>
  any_field& operator()(const char*, T&&) {
    return *this;
  }
};

/// A struct with a field list above (a schema struct of its own on the wire).
template <class T>
concept mapped = requires(any_field& f, T& v) { fields(f, v); };

}  // namespace sailor::protocol::detail
