// The encoder: each message struct into its schema struct, field for field.

#include <cstring>
#include <iterator>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "codec_internal.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol {
namespace {

using namespace detail;

// Text for people, cut to its bound so that the message stays under its kind's ceiling
// (protocol/limits.hpp): a long exception text must not get its node refused.
std::string reason(const std::string& text) { return clip_text(text, wire_bounds::reason_bytes); }

template <class Builder, class T>
void put_list(Builder out, const std::vector<T>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

template <class T>
unsigned size32(const std::vector<T>& v) {
  return static_cast<unsigned>(v.size());
}

void put(s::Device::Builder b, const device_info& v);
void put(s::StageRole::Builder b, const stage_role& v);
void put(s::NodeStatus::Builder b, const node_status& v);
void put(s::PeerRefused::Builder b, const peer_refused& v);
void put(s::ZoneLink::Builder b, const config::zone_link& v);

// Each element of `in` into the list `out`, by the put() of its type (declared above: a call
// in a template finds no function of this unnamed namespace declared after it).
template <class List, class T>
void put_each(List out, const std::vector<T>& in) {
  for (unsigned i = 0; i < in.size(); ++i) put(out[i], in[i]);
}

capnp::Data::Reader data_of(const std::vector<char>& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

void put(s::Device::Builder b, const device_info& v) {
  b.setIndex(v.index);
  b.setKind(v.kind);
  b.setMemoryBytes(v.memory_bytes);
}

void put(s::PeerRefused::Builder b, const peer_refused& v) {
  b.setPeer(v.peer);
  b.setReason(v.reason);
  b.setUnixMs(v.unix_ms);
}

void put(s::ZoneLink::Builder b, const config::zone_link& v) {
  b.setFrom(v.from);
  b.setTo(v.to);
  b.setLatencyS(v.latency_s);
  b.setBandwidthGbytesPerS(v.bandwidth_gbytes_per_s);
  b.setEgressUsdPerGb(v.egress_usd_per_gb);
}

void put(s::NodeInventory::Builder b, const node_inventory& v) {
  b.setName(v.name);
  b.setZone(v.zone);
  b.setGpuType(v.gpu_type);
  b.setHost(v.host);
  put_each(b.initDevices(size32(v.devices)), v.devices);
  b.setAddress(v.address);
  put_list(b.initCheckpoints(size32(v.checkpoints)), v.checkpoints);
}

void put(s::StageRole::Builder b, const stage_role& v) {
  b.setPlanVersion(v.plan_version);
  b.setStage(v.stage);
  b.setReplica(v.replica);
  b.setTpRank(v.tp_rank);
  b.setTp(v.tp);
  b.setDevice(v.device);
  b.setFirstLayer(v.first_layer);
  b.setNumLayers(v.num_layers);
  b.setMicroBatch(v.micro_batch);
  b.setNumStages(v.num_stages);
  b.setGpuType(v.gpu_type);
  b.setZone(v.zone);
}

void put(s::Plan::Builder b, const config::plan& p) {
  b.setMicroBatch(p.micro_batch);
  b.setGlobalBatch(p.global_batch);
  auto stages = b.initStages(static_cast<unsigned>(p.stages.size()));
  for (unsigned i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    stages[i].setFirstLayer(st.first_layer);
    stages[i].setNumLayers(st.num_layers);
    stages[i].setRecompute(st.recompute);
    auto reps = stages[i].initReplicas(static_cast<unsigned>(st.replicas.size()));
    for (unsigned j = 0; j < st.replicas.size(); ++j) {
      const auto& r = st.replicas[j];
      reps[j].setGpuType(r.gpu_type);
      reps[j].setZone(r.zone);
      reps[j].setTp(r.tp);
      put_list(reps[j].initNodes(size32(r.nodes)), r.nodes);
      put_list(reps[j].initDevices(size32(r.devices)), r.devices);
    }
  }
  b.setHasEstimate(p.estimate.has_value());
  if (p.estimate) {
    auto e = b.initEstimate();
    e.setIterationTimeS(p.estimate->iteration_time_s);
    e.setThroughputItersPerS(p.estimate->throughput_iters_per_s);
    e.setCostPerIterationUsd(p.estimate->cost_per_iteration_usd);
    e.setCostPerHourUsd(p.estimate->cost_per_hour_usd);
    e.setPeakMemoryBytes(p.estimate->peak_memory_bytes);
  }
}

void put(s::ModelShape::Builder b, const config::model_shape& m) {
  b.setName(m.name);
  b.setSailorName(m.sailor_name);
  b.setNumLayers(m.num_layers);
  b.setHidden(m.hidden);
  b.setHeads(m.heads);
  b.setKvHeads(m.kv_heads);
  b.setFfnHidden(m.ffn_hidden);
  b.setGatedMlp(m.gated_mlp);
  b.setSequence(m.sequence);
  b.setVocabulary(m.vocabulary);
  b.setPrecision(to_wire(precisions, m.precision));
  b.setTiedEmbeddings(m.tied_embeddings);
  b.setLearnedPositions(m.learned_positions);
  b.setArch(to_wire(architectures, m.arch));
  b.setBias(m.bias);
  b.setNormEps(m.norm_eps);
  b.setRopeTheta(m.rope_theta);
}

void put(s::NodeStatus::Builder b, const node_status& v) {
  put(b.initInventory(), v.inventory);
  b.setState(v.state);
  b.setHeartbeatAgeMs(v.heartbeat_age_ms);
  put_each(b.initRoles(size32(v.roles)), v.roles);
  b.setReadyRoles(v.ready_roles);
}

void put(s::ClusterStatus::Builder b, const cluster_status& v) {
  b.setPhase(v.phase);
  b.setPlanVersion(v.plan_version);
  b.setQuorum(v.quorum);
  b.setStages(v.stages);
  b.setReplicas(v.replicas);
  b.setRolesTotal(v.roles_total);
  b.setRolesReady(v.roles_ready);
  b.setPlanSummary(v.plan_summary);
  put_list(b.initZones(size32(v.zones)), v.zones);
  put_each(b.initNodes(size32(v.nodes)), v.nodes);
  put_list(b.initEvents(size32(v.events)), v.events);
  put_each(b.initRefusals(size32(v.refusals)), v.refusals);
  b.setTrainingCompleted(v.training_completed);
  b.setTrainingTotal(v.training_total);
  b.setTrainingLoss(v.training_loss);
  b.setTrainingSummary(v.training_summary);
  put_list(b.initValIterations(size32(v.val_iterations)), v.val_iterations);
  put_list(b.initValLosses(size32(v.val_losses)), v.val_losses);
}

void put_schedule(s::TrainingJob::Builder b, const training_job& v) {
  b.setMinLearningRate(v.min_learning_rate);
  b.setWarmupIterations(v.warmup_iterations);
  b.setDecayIterations(v.decay_iterations);
  b.setBeta1(v.beta1);
  b.setBeta2(v.beta2);
  b.setWeightDecay(v.weight_decay);
  b.setGradClip(v.grad_clip);
  b.setEvalEvery(v.eval_every);
  b.setEvalBatches(v.eval_batches);
}

void put(s::TrainingJob::Builder b, const training_job& v) {
  b.setPlanVersion(v.plan_version);
  put(b.initModel(), v.model);
  b.setIterations(v.iterations);
  b.setSeed(v.seed);
  b.setOptimizer(v.optimizer);
  b.setLearningRate(v.learning_rate);
  b.setTorchThreads(v.torch_threads);
  b.setTimeoutMs(v.timeout_ms);
  b.setPredictedIterationS(v.predicted_iteration_s);
  put_each(b.initLinks(size32(v.links)), v.links);
  b.setStartIteration(v.start_iteration);
  b.setCheckpointDir(v.checkpoint_dir);
  b.setCheckpointEvery(v.checkpoint_every);
  b.setRestoreDir(v.restore_dir);
  put_list(b.initRestoreFiles(size32(v.restore_files)), v.restore_files);
  put_list(b.initRestoreHolders(size32(v.restore_holders)), v.restore_holders);
  auto data = b.initData();
  data.setPath(v.data.path);
  data.setFormat(to_wire(data_formats, v.data.format));
  data.setValidationFraction(v.data.validation_fraction);
  put_schedule(b, v);
  put_list(b.initPeerNodes(size32(v.peer_nodes)), v.peer_nodes);
  put_list(b.initPeerAddresses(size32(v.peer_addresses)), v.peer_addresses);
  put_list(b.initKeepCheckpointDirs(size32(v.keep_checkpoint_dirs)), v.keep_checkpoint_dirs);
}

void put(s::TrainReport::Builder b, const train_report& v) {
  b.setPlanVersion(v.plan_version);
  b.setNode(v.node);
  b.setRank(v.rank);
  b.setStage(v.stage);
  b.setReplica(v.replica);
  b.setTpRank(v.tp_rank);
  b.setIteration(v.iteration);
  b.setLoss(v.loss);
  b.setComputeS(v.compute_s);
  b.setSendWaitS(v.send_wait_s);
  b.setRecvWaitS(v.recv_wait_s);
  b.setAllReduceS(v.all_reduce_s);
  b.setTotalS(v.total_s);
  b.setTokens(v.tokens);
  b.setError(reason(v.error));
  b.setCheckpointFile(v.checkpoint_file);
  b.setHasValLoss(v.has_val_loss);
  b.setValLoss(v.val_loss);
  b.setKind(v.kind);
  b.setPhase(clip_text(v.phase, wire_bounds::word_bytes));
  b.setBlamedNode(v.blamed_node);
  b.setBytes(v.bytes);
}

// One visitor over `message`: each alternative into its member of the envelope's union.
struct body_writer {
  s::Envelope::Body::Builder b;

  void operator()(const join_request& v) {
    auto x = b.initJoinRequest();
    x.setVersion(v.version);
    put(x.initInventory(), v.inventory);
  }
  void operator()(const join_accepted& v) {
    auto x = b.initJoinAccepted();
    x.setNode(v.node);
    x.setZoneActor(v.zone_actor);
    x.setHeartbeatIntervalMs(v.heartbeat_interval_ms);
    x.setHeartbeatTimeoutMs(v.heartbeat_timeout_ms);
  }
  void operator()(const join_refused& v) {
    auto x = b.initJoinRefused();
    x.setReason(reason(v.reason));
    x.setCode(to_wire(refuse_reasons, v.code));
  }
  void operator()(const heartbeat& v) {
    auto x = b.initHeartbeat();
    x.setNode(v.node);
    x.setSeq(v.seq);
  }
  void operator()(const role_assignment& v) {
    // A role travels as its place in the plan: the decoder fills in the rest from the plan.
    auto x = b.initRoleAssignment();
    x.setPlanVersion(v.plan_version);
    auto roles = x.initRoles(static_cast<unsigned>(v.roles.size()));
    for (unsigned i = 0; i < v.roles.size(); ++i) {
      roles[i].setStage(v.roles[i].stage);
      roles[i].setReplica(v.roles[i].replica);
      roles[i].setTpRank(v.roles[i].tp_rank);
      roles[i].setDevice(v.roles[i].device);
    }
    put(x.initPlan(), v.plan);
  }
  void operator()(const stage_ready& v) {
    auto x = b.initStageReady();
    x.setNode(v.node);
    put(x.initRole(), v.role);
  }
  void operator()(const stage_failed& v) {
    auto x = b.initStageFailed();
    x.setNode(v.node);
    put(x.initRole(), v.role);
    x.setReason(reason(v.reason));
  }
  void operator()(const preemption_notice& v) {
    auto x = b.initPreemptionNotice();
    x.setNode(v.node);
    x.setReason(reason(v.reason));
    x.setSecondsLeft(v.seconds_left);
  }
  void operator()(const shutdown_notice& v) { b.initShutdownNotice().setReason(reason(v.reason)); }
  void operator()(const status_request& v) { b.initStatusRequest().setUnused(v.unused); }
  void operator()(const cluster_status& v) { put(b.initClusterStatus(), v); }
  void operator()(const training_job& v) { put(b.initTrainingJob(), v); }
  void operator()(const train_report& v) { put(b.initTrainReport(), v); }
  void operator()(const store_request& v) {
    auto x = b.initStoreRequest();
    x.setRequestId(v.request_id);
    x.setPlanVersion(v.plan_version);
    x.setKey(v.key);
    x.setSet(v.set);
    x.setValue(data_of(v.value));
    x.setTimeoutMs(v.timeout_ms);
    x.setNode(v.node);
  }
  void operator()(const store_reply& v) {
    auto x = b.initStoreReply();
    x.setRequestId(v.request_id);
    x.setFound(v.found);
    x.setValue(data_of(v.value));
    x.setError(reason(v.error));
  }
  void operator()(const checkpoint_kept& v) {
    auto x = b.initCheckpointKept();
    x.setPlanVersion(v.plan_version);
    x.setIterations(v.iterations);
    x.setFolder(v.folder);
  }
  // The link probes' messages: codec_probe.cpp.
  void operator()(const link_probe_request& v) { put_probe(b, v); }
  void operator()(const link_probe_result& v) { put_probe(b, v); }
  // The scheduler's messages: codec_scheduler.cpp.
  template <class T>
  void operator()(const T& v) {
    put_scheduler(b, v);
  }
};

}  // namespace

void detail::put_zone_links(capnp::List<s::ZoneLink>::Builder b,
                            const std::vector<config::zone_link>& v) {
  put_each(b, v);
}

void detail::put_inventory(s::NodeInventory::Builder b, const node_inventory& v) { put(b, v); }
void detail::put_plan(s::Plan::Builder b, const config::plan& p) { put(b, p); }

const char* name_of(const message& m) {
  static constexpr const char* names[] = {
    "join_request",  "join_accepted",  "join_refused",     "heartbeat",
    "role_assignment", "stage_ready",  "stage_failed",     "preemption_notice",
    "shutdown_notice", "status_request", "cluster_status", "training_job",
    "train_report",  "store_request",  "store_reply",
    "plan_request",  "plan_reply",     "availability_event", "iteration_telemetry",
    "plan_applied",  "plan_refused",   "replan_finished", "scheduler_hello",
    "scheduler_request", "scheduler_reply", "link_probe_request", "link_probe_result",
    "checkpoint_kept"};
  static_assert(std::size(names) == std::variant_size_v<message>);
  return names[m.index()];
}

const char* to_string(refuse_reason r) {
  switch (r) {
    case refuse_reason::other: return "other";
    case refuse_reason::protocol_version: return "protocol_version";
    case refuse_reason::invalid_message: return "invalid_message";
    case refuse_reason::duplicate_node: return "duplicate_node";
    case refuse_reason::unknown_zone: return "unknown_zone";
    case refuse_reason::shutting_down: return "shutting_down";
    case refuse_reason::unauthorized: return "unauthorized";
  }
  return "other";
}

std::vector<std::byte> encode(const envelope& e) {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<s::Envelope>();
  root.setProtocolVersion(e.version);
  root.setSender(e.sender);
  root.setDestination(e.destination);
  std::visit(body_writer{root.initBody()}, e.body);
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.begin(), chars.size());
  return out;
}

}  // namespace sailor::protocol
