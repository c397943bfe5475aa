#include "sailor/comm/messages.hpp"

#include <cstring>
#include <iterator>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <sailor/comm/schema/messages.capnp.h>

#include "sailor/comm/transport.hpp"

namespace sailor::comm {
namespace {

namespace s = sailor::comm::schema;

// ---- value -> schema ----

void set_texts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

capnp::Data::Reader data_of(const std::vector<char>& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

void put_role(s::Role::Builder b, const role& r) {
  b.setStage(r.stage);
  b.setReplica(r.replica);
  b.setTpRank(r.tp_rank);
  b.setNodeId(r.node_id);
  b.setDevice(r.device);
}

void put_inventory(s::NodeInventory::Builder b, const node_inventory& v) {
  b.setNodeId(v.node_id);
  b.setHost(v.host);
  b.setZone(v.zone);
  b.setAddress(v.address);
  auto devs = b.initDevices(static_cast<unsigned>(v.devices.size()));
  for (unsigned i = 0; i < v.devices.size(); ++i) {
    devs[i].setIndex(v.devices[i].index);
    devs[i].setGpuType(v.devices[i].gpu_type);
    devs[i].setMemoryBytes(v.devices[i].memory_bytes);
    devs[i].setKind(v.devices[i].kind);
  }
  b.setGpuType(v.gpu_type);
  set_texts(b.initCheckpoints(static_cast<unsigned>(v.checkpoints.size())), v.checkpoints);
}

void put_shape(s::StageShape::Builder b, const stage_shape& v) {
  b.setTp(v.tp);
  b.setFirstLayer(v.first_layer);
  b.setNumLayers(v.num_layers);
  b.setMicroBatch(v.micro_batch);
  b.setNumStages(v.num_stages);
  b.setGpuType(v.gpu_type);
  b.setZone(v.zone);
}

void put_model(s::ModelShape::Builder b, const config::model_shape& m) {
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
  switch (m.precision) {
    case config::dtype::fp32: b.setPrecision(s::Precision::FP32); break;
    case config::dtype::fp16: b.setPrecision(s::Precision::FP16); break;
    case config::dtype::bf16: b.setPrecision(s::Precision::BF16); break;
  }
  b.setTiedEmbeddings(m.tied_embeddings);
  b.setLearnedPositions(m.learned_positions);
  switch (m.arch) {
    case config::architecture::gpt2: b.setArch(s::Architecture::GPT2); break;
    case config::architecture::opt: b.setArch(s::Architecture::OPT); break;
    case config::architecture::llama: b.setArch(s::Architecture::LLAMA); break;
  }
  b.setBias(m.bias);
  b.setNormEps(m.norm_eps);
  b.setRopeTheta(m.rope_theta);
}

s::DataFormat data_format_of(config::data_format f) {
  switch (f) {
    case config::data_format::tokens_u16: return s::DataFormat::TOKENS_U16;
    case config::data_format::tokens_u32: return s::DataFormat::TOKENS_U32;
    case config::data_format::text: break;
  }
  return s::DataFormat::TEXT;
}

void put_plan(s::Plan::Builder b, const config::plan& p) {
  b.setMicroBatch(p.micro_batch);
  b.setGlobalBatch(p.global_batch);
  auto stages = b.initStages(static_cast<unsigned>(p.stages.size()));
  for (unsigned i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    auto sb = stages[i];
    sb.setFirstLayer(st.first_layer);
    sb.setNumLayers(st.num_layers);
    sb.setRecompute(st.recompute);
    auto reps = sb.initReplicas(static_cast<unsigned>(st.replicas.size()));
    for (unsigned j = 0; j < st.replicas.size(); ++j) {
      const auto& r = st.replicas[j];
      auto rb = reps[j];
      rb.setGpuType(r.gpu_type);
      rb.setZone(r.zone);
      rb.setTp(r.tp);
      auto nodes = rb.initNodes(static_cast<unsigned>(r.nodes.size()));
      for (unsigned k = 0; k < r.nodes.size(); ++k) nodes.set(k, r.nodes[k]);
      auto devs = rb.initDevices(static_cast<unsigned>(r.devices.size()));
      for (unsigned k = 0; k < r.devices.size(); ++k) devs.set(k, r.devices[k]);
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

s::RefuseReason to_schema(refuse_reason r) {
  switch (r) {
    case refuse_reason::protocol_version: return s::RefuseReason::PROTOCOL_VERSION;
    case refuse_reason::unknown_message: return s::RefuseReason::UNKNOWN_MESSAGE;
    case refuse_reason::invalid_message: return s::RefuseReason::INVALID_MESSAGE;
    case refuse_reason::duplicate_node: return s::RefuseReason::DUPLICATE_NODE;
    case refuse_reason::unknown_zone: return s::RefuseReason::UNKNOWN_ZONE;
    case refuse_reason::shutting_down: return s::RefuseReason::SHUTTING_DOWN;
    case refuse_reason::other: return s::RefuseReason::OTHER;
  }
  return s::RefuseReason::OTHER;
}

refuse_reason from_schema(s::RefuseReason r) {
  switch (r) {
    case s::RefuseReason::PROTOCOL_VERSION: return refuse_reason::protocol_version;
    case s::RefuseReason::UNKNOWN_MESSAGE: return refuse_reason::unknown_message;
    case s::RefuseReason::INVALID_MESSAGE: return refuse_reason::invalid_message;
    case s::RefuseReason::DUPLICATE_NODE: return refuse_reason::duplicate_node;
    case s::RefuseReason::UNKNOWN_ZONE: return refuse_reason::unknown_zone;
    case s::RefuseReason::SHUTTING_DOWN: return refuse_reason::shutting_down;
    default: return refuse_reason::other;
  }
}

struct body_writer {
  s::Envelope::Body::Builder b;
  void operator()(const join_request& v) { put_inventory(b.initJoin().initInventory(), v.inventory); }
  void operator()(const join_accept& v) {
    auto a = b.initAccept();
    a.setNodeId(v.node_id);
    a.setCoordinator(v.coordinator);
    a.setHeartbeatIntervalS(v.heartbeat_interval_s);
    a.setZoneActor(v.zone_actor);
    a.setHeartbeatTimeoutS(v.heartbeat_timeout_s);
  }
  void operator()(const refusal& v) {
    auto r = b.initRefuse();
    r.setReason(to_schema(v.reason));
    r.setDetail(v.detail);
  }
  void operator()(const heartbeat& v) {
    auto h = b.initHeartbeat();
    h.setNodeId(v.node_id);
    h.setSequence(v.sequence);
    h.setSentUnixNs(v.sent_unix_ns);
  }
  void operator()(const role_assignment& v) {
    auto a = b.initAssignment();
    a.setPlanEpoch(v.plan_epoch);
    put_plan(a.initPlan(), v.plan);
    auto roles = a.initRoles(static_cast<unsigned>(v.roles.size()));
    for (unsigned i = 0; i < v.roles.size(); ++i) put_role(roles[i], v.roles[i]);
    auto peers = a.initPeers(static_cast<unsigned>(v.peers.size()));
    for (unsigned i = 0; i < v.peers.size(); ++i) {
      put_role(peers[i].initRole(), v.peers[i].where);
      peers[i].setAddress(v.peers[i].address);
    }
  }
  void operator()(const stage_ready& v) {
    auto r = b.initStageReady();
    r.setPlanEpoch(v.plan_epoch);
    put_role(r.initRole(), v.where);
    put_shape(r.initShape(), v.shape);
  }
  void operator()(const stage_failed& v) {
    auto r = b.initStageFailed();
    r.setPlanEpoch(v.plan_epoch);
    put_role(r.initRole(), v.where);
    put_shape(r.initShape(), v.shape);
    r.setReason(v.reason);
  }
  void operator()(const status_request& v) { b.initStatusRequest().setToken(v.token); }
  void operator()(const status_reply& v) {
    auto r = b.initStatusReply();
    r.setPhase(v.phase);
    r.setPlanEpoch(v.plan_epoch);
    r.setQuorum(v.quorum);
    r.setStages(v.stages);
    r.setReplicas(v.replicas);
    r.setRolesTotal(v.roles_total);
    r.setRolesReady(v.roles_ready);
    r.setPlanSummary(v.plan_summary);
    r.setTrainingCompleted(v.training_completed);
    r.setTrainingTotal(v.training_total);
    r.setTrainingLoss(v.training_loss);
    r.setTrainingSummary(v.training_summary);
    auto val_iterations = r.initValIterations(static_cast<unsigned>(v.val_iterations.size()));
    for (unsigned i = 0; i < v.val_iterations.size(); ++i) val_iterations.set(i, v.val_iterations[i]);
    auto val_losses = r.initValLosses(static_cast<unsigned>(v.val_losses.size()));
    for (unsigned i = 0; i < v.val_losses.size(); ++i) val_losses.set(i, v.val_losses[i]);
    auto zones = r.initZones(static_cast<unsigned>(v.zones.size()));
    for (unsigned i = 0; i < v.zones.size(); ++i) zones.set(i, v.zones[i]);
    auto nodes = r.initNodes(static_cast<unsigned>(v.nodes.size()));
    for (unsigned i = 0; i < v.nodes.size(); ++i) {
      const auto& n = v.nodes[i];
      put_inventory(nodes[i].initInventory(), n.inventory);
      nodes[i].setState(n.state);
      nodes[i].setHeartbeatAgeMs(n.heartbeat_age_ms);
      nodes[i].setReadyRoles(n.ready_roles);
      auto roles = nodes[i].initRoles(static_cast<unsigned>(n.roles.size()));
      for (unsigned j = 0; j < n.roles.size(); ++j) {
        roles[j].setPlanEpoch(n.roles[j].plan_epoch);
        put_role(roles[j].initRole(), n.roles[j].where);
        put_shape(roles[j].initShape(), n.roles[j].shape);
      }
    }
    auto events = r.initEvents(static_cast<unsigned>(v.events.size()));
    for (unsigned i = 0; i < v.events.size(); ++i) events.set(i, v.events[i]);
    auto refusals = r.initRefusals(static_cast<unsigned>(v.refusals.size()));
    for (unsigned i = 0; i < v.refusals.size(); ++i) {
      refusals[i].setPeer(v.refusals[i].peer);
      refusals[i].setReason(v.refusals[i].reason);
      refusals[i].setUnixMs(v.refusals[i].unix_ms);
    }
  }
  void operator()(const training_job& v) {
    auto j = b.initTrainingJob();
    j.setPlanEpoch(v.plan_epoch);
    put_plan(j.initPlan(), v.plan);
    put_model(j.initModel(), v.model);
    j.setIterations(v.iterations);
    j.setSeed(v.seed);
    j.setOptimizer(v.optimizer);
    j.setLearningRate(v.learning_rate);
    j.setTorchThreads(v.torch_threads);
    j.setTimeoutMs(v.timeout_ms);
    j.setPredictedIterationS(v.predicted_iteration_s);
    auto links = j.initLinks(static_cast<unsigned>(v.links.size()));
    for (unsigned i = 0; i < v.links.size(); ++i) {
      links[i].setFrom(v.links[i].from);
      links[i].setTo(v.links[i].to);
      links[i].setLatencyS(v.links[i].latency_s);
      links[i].setBandwidthGbytesPerS(v.links[i].bandwidth_gbytes_per_s);
      links[i].setEgressUsdPerGb(v.links[i].egress_usd_per_gb);
    }
    j.setStartIteration(v.start_iteration);
    j.setCheckpointDir(v.checkpoint_dir);
    j.setCheckpointEvery(v.checkpoint_every);
    j.setRestoreDir(v.restore_dir);
    set_texts(j.initRestoreFiles(static_cast<unsigned>(v.restore_files.size())), v.restore_files);
    set_texts(j.initRestoreHolders(static_cast<unsigned>(v.restore_holders.size())),
              v.restore_holders);
    j.setDataPath(v.data_path);
    j.setDataFormat(data_format_of(v.data_format));
    j.setValidationFraction(v.validation_fraction);
    j.setMinLearningRate(v.min_learning_rate);
    j.setWarmupIterations(v.warmup_iterations);
    j.setDecayIterations(v.decay_iterations);
    j.setBeta1(v.beta1);
    j.setBeta2(v.beta2);
    j.setWeightDecay(v.weight_decay);
    j.setGradClip(v.grad_clip);
    j.setEvalEvery(v.eval_every);
    j.setEvalBatches(v.eval_batches);
    set_texts(j.initPeerNodes(static_cast<unsigned>(v.peer_nodes.size())), v.peer_nodes);
    set_texts(j.initPeerAddresses(static_cast<unsigned>(v.peer_addresses.size())),
              v.peer_addresses);
    set_texts(j.initKeepCheckpointDirs(static_cast<unsigned>(v.keep_checkpoint_dirs.size())),
              v.keep_checkpoint_dirs);
  }
  void operator()(const train_report& v) {
    auto r = b.initTrainReport();
    r.setPlanEpoch(v.plan_epoch);
    r.setRank(v.rank);
    put_role(r.initRole(), v.where);
    r.setIteration(v.iteration);
    r.setLoss(v.loss);
    r.setComputeS(v.compute_s);
    r.setSendWaitS(v.send_wait_s);
    r.setRecvWaitS(v.recv_wait_s);
    r.setAllreduceS(v.allreduce_s);
    r.setTotalS(v.total_s);
    r.setTokens(v.tokens);
    r.setError(v.error);
    r.setCheckpointFile(v.checkpoint_file);
    r.setHasValLoss(v.has_val_loss);
    r.setValLoss(v.val_loss);
    r.setKind(static_cast<s::TrainReportKind>(v.kind));
    r.setPhase(v.phase);
    r.setBlamedNode(v.blamed_node);
    r.setBytes(v.bytes);
  }
  void operator()(const iteration_telemetry& v) {
    auto t = b.initTelemetry();
    t.setPlanEpoch(v.plan_epoch);
    t.setIteration(v.iteration);
    put_role(t.initRole(), v.where);
    t.setComputeS(v.compute_s);
    t.setSendWaitS(v.send_wait_s);
    t.setRecvWaitS(v.recv_wait_s);
    t.setAllreduceS(v.allreduce_s);
    t.setIterationS(v.iteration_s);
    t.setLoss(v.loss);
  }
  void operator()(const preemption_notice& v) {
    auto p = b.initPreemption();
    p.setNodeId(v.node_id);
    p.setSecondsLeft(v.seconds_left);
    p.setReason(v.reason);
  }
  void operator()(const shutdown_notice& v) { b.initShutdown().setReason(v.reason); }
  void operator()(const store_request& v) {
    auto r = b.initStoreRequest();
    r.setRequestId(v.request_id);
    r.setPlanEpoch(v.plan_epoch);
    r.setKey(v.key);
    r.setSet(v.set);
    r.setValue(data_of(v.value));
    r.setTimeoutMs(v.timeout_ms);
    r.setNode(v.node);
  }
  void operator()(const store_reply& v) {
    auto r = b.initStoreReply();
    r.setRequestId(v.request_id);
    r.setFound(v.found);
    r.setValue(data_of(v.value));
    r.setError(v.error);
  }
};

// ---- schema -> value ----

std::vector<char> chars_of(capnp::Data::Reader d) {
  return std::vector<char>(reinterpret_cast<const char*>(d.begin()),
                           reinterpret_cast<const char*>(d.end()));
}

role get_role(s::Role::Reader r) {
  return role{r.getStage(), r.getReplica(), r.getTpRank(), r.getNodeId(), r.getDevice()};
}

node_inventory get_inventory(s::NodeInventory::Reader r) {
  node_inventory v;
  v.node_id = r.getNodeId();
  v.host = r.getHost();
  v.zone = r.getZone();
  v.address = r.getAddress();
  for (auto d : r.getDevices())
    v.devices.push_back({d.getIndex(), d.getGpuType(), d.getMemoryBytes(), d.getKind()});
  v.gpu_type = r.getGpuType();
  for (auto c : r.getCheckpoints()) v.checkpoints.emplace_back(c);
  return v;
}

stage_shape get_shape(s::StageShape::Reader r) {
  return stage_shape{r.getTp(),        r.getFirstLayer(), r.getNumLayers(), r.getMicroBatch(),
                     r.getNumStages(), r.getGpuType(),    r.getZone()};
}

std::variant<config::model_shape, transport_error> get_model(s::ModelShape::Reader r) {
  config::model_shape m;
  m.name = r.getName();
  m.sailor_name = r.getSailorName();
  m.num_layers = r.getNumLayers();
  m.hidden = r.getHidden();
  m.heads = r.getHeads();
  m.kv_heads = r.getKvHeads();
  m.ffn_hidden = r.getFfnHidden();
  m.gated_mlp = r.getGatedMlp();
  m.sequence = r.getSequence();
  m.vocabulary = r.getVocabulary();
  switch (r.getPrecision()) {
    case s::Precision::FP32: m.precision = config::dtype::fp32; break;
    case s::Precision::FP16: m.precision = config::dtype::fp16; break;
    case s::Precision::BF16: m.precision = config::dtype::bf16; break;
    default:
      return transport_error{errc::invalid_message,
                             "model '" + m.name + "' has unknown precision " +
                                 std::to_string(static_cast<unsigned>(r.getPrecision()))};
  }
  m.tied_embeddings = r.getTiedEmbeddings();
  m.learned_positions = r.getLearnedPositions();
  switch (r.getArch()) {
    case s::Architecture::GPT2: m.arch = config::architecture::gpt2; break;
    case s::Architecture::OPT: m.arch = config::architecture::opt; break;
    case s::Architecture::LLAMA: m.arch = config::architecture::llama; break;
    default:
      return transport_error{errc::invalid_message,
                             "model '" + m.name + "' has unknown architecture " +
                                 std::to_string(static_cast<unsigned>(r.getArch()))};
  }
  m.bias = r.getBias();
  m.norm_eps = r.getNormEps();
  m.rope_theta = r.getRopeTheta();
  return m;
}

config::plan get_plan(s::Plan::Reader r) {
  config::plan p;
  p.micro_batch = r.getMicroBatch();
  p.global_batch = r.getGlobalBatch();
  for (auto sr : r.getStages()) {
    config::stage_plan st;
    st.first_layer = sr.getFirstLayer();
    st.num_layers = sr.getNumLayers();
    st.recompute = sr.getRecompute();
    for (auto rr : sr.getReplicas()) {
      config::replica rep;
      rep.gpu_type = rr.getGpuType();
      rep.zone = rr.getZone();
      rep.tp = rr.getTp();
      for (auto n : rr.getNodes()) rep.nodes.emplace_back(n);
      for (auto d : rr.getDevices()) rep.devices.push_back(d);
      st.replicas.push_back(std::move(rep));
    }
    p.stages.push_back(std::move(st));
  }
  if (r.getHasEstimate()) {
    auto e = r.getEstimate();
    p.estimate = config::plan_estimate{e.getIterationTimeS(), e.getThroughputItersPerS(),
                                       e.getCostPerIterationUsd(), e.getCostPerHourUsd(),
                                       e.getPeakMemoryBytes()};
  }
  return p;
}

std::vector<std::byte> to_bytes(capnp::MessageBuilder& mb) {
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.begin(), chars.size());
  return out;
}

// Cap'n Proto reads words: copy into aligned storage when the bytes are not aligned.
kj::Array<capnp::word> aligned_copy(std::span<const std::byte> bytes) {
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), words.size() * sizeof(capnp::word));
  return words;
}

transport_error invalid(std::string what) { return {errc::invalid_message, std::move(what)}; }

template <class F>
auto read_flat(std::span<const std::byte> bytes, F&& f)
    -> decltype(f(std::declval<capnp::FlatArrayMessageReader&>())) {
  if (bytes.empty()) return invalid("empty message");
  if (bytes.size() % sizeof(capnp::word) != 0)
    return invalid("message of " + std::to_string(bytes.size()) +
                   " bytes is not a whole number of 8-byte words");
  try {
    auto words = aligned_copy(bytes);
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 64 * 1024 * 1024;
    capnp::FlatArrayMessageReader reader(words, opts);
    return f(reader);
  } catch (const kj::Exception& e) {
    return invalid(std::string("does not decode: ") + e.getDescription().cStr());
  }
}

}  // namespace

const char* to_string(refuse_reason r) {
  switch (r) {
    case refuse_reason::protocol_version: return "protocol_version";
    case refuse_reason::unknown_message: return "unknown_message";
    case refuse_reason::invalid_message: return "invalid_message";
    case refuse_reason::duplicate_node: return "duplicate_node";
    case refuse_reason::unknown_zone: return "unknown_zone";
    case refuse_reason::shutting_down: return "shutting_down";
    case refuse_reason::other: return "other";
  }
  return "other";
}

const char* body_name(const message_body& body) {
  static constexpr const char* names[] = {"join",        "accept",    "refuse",
                                          "heartbeat",   "assignment", "stage_ready",
                                          "telemetry",   "preemption", "shutdown",
                                          "stage_failed", "status_request", "status_reply",
                                          "training_job", "train_report", "store_request",
                                          "store_reply"};
  static_assert(std::size(names) == std::variant_size_v<message_body>);
  return names[body.index()];
}

std::vector<std::byte> encode(const envelope& e) {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<s::Envelope>();
  root.setProtocolVersion(e.version);
  root.setSender(e.sender);
  root.setDestination(e.destination);
  std::visit(body_writer{root.initBody()}, e.body);
  return to_bytes(mb);
}

std::vector<std::byte> encode(const std::string& sender, message_body body,
                              const std::string& destination) {
  return encode(envelope{protocol_version, sender, std::move(body), destination});
}

std::variant<envelope, transport_error> decode_envelope(std::span<const std::byte> bytes) {
  auto out = read_flat(bytes, [](capnp::FlatArrayMessageReader& reader)
                                  -> std::variant<envelope, transport_error> {
    auto root = reader.getRoot<s::Envelope>();
    envelope e;
    e.version = root.getProtocolVersion();
    e.sender = root.getSender();
    e.destination = root.getDestination();
    if (e.version != protocol_version)
      return transport_error{errc::protocol_mismatch,
                             "message from '" + e.sender + "' speaks protocol version " +
                                 std::to_string(e.version) + ", this build speaks " +
                                 std::to_string(protocol_version)};
    auto b = root.getBody();
    switch (b.which()) {
      case s::Envelope::Body::JOIN:
        e.body = join_request{get_inventory(b.getJoin().getInventory())};
        break;
      case s::Envelope::Body::ACCEPT: {
        auto a = b.getAccept();
        e.body = join_accept{a.getNodeId(), a.getCoordinator(), a.getHeartbeatIntervalS(),
                             a.getZoneActor(), a.getHeartbeatTimeoutS()};
        break;
      }
      case s::Envelope::Body::REFUSE: {
        auto r = b.getRefuse();
        e.body = refusal{from_schema(r.getReason()), r.getDetail()};
        break;
      }
      case s::Envelope::Body::HEARTBEAT: {
        auto h = b.getHeartbeat();
        e.body = heartbeat{h.getNodeId(), h.getSequence(), h.getSentUnixNs()};
        break;
      }
      case s::Envelope::Body::ASSIGNMENT: {
        auto a = b.getAssignment();
        role_assignment v;
        v.plan_epoch = a.getPlanEpoch();
        v.plan = get_plan(a.getPlan());
        for (auto r : a.getRoles()) v.roles.push_back(get_role(r));
        for (auto p : a.getPeers()) v.peers.push_back({get_role(p.getRole()), p.getAddress()});
        e.body = std::move(v);
        break;
      }
      case s::Envelope::Body::STAGE_READY: {
        auto r = b.getStageReady();
        e.body = stage_ready{r.getPlanEpoch(), get_role(r.getRole()), get_shape(r.getShape())};
        break;
      }
      case s::Envelope::Body::STAGE_FAILED: {
        auto r = b.getStageFailed();
        e.body = stage_failed{r.getPlanEpoch(), get_role(r.getRole()), get_shape(r.getShape()),
                              r.getReason()};
        break;
      }
      case s::Envelope::Body::STATUS_REQUEST:
        e.body = status_request{b.getStatusRequest().getToken()};
        break;
      case s::Envelope::Body::STATUS_REPLY: {
        auto r = b.getStatusReply();
        status_reply v;
        v.phase = r.getPhase();
        v.plan_epoch = r.getPlanEpoch();
        v.quorum = r.getQuorum();
        v.stages = r.getStages();
        v.replicas = r.getReplicas();
        v.roles_total = r.getRolesTotal();
        v.roles_ready = r.getRolesReady();
        v.plan_summary = r.getPlanSummary();
        v.training_completed = r.getTrainingCompleted();
        v.training_total = r.getTrainingTotal();
        v.training_loss = r.getTrainingLoss();
        v.training_summary = r.getTrainingSummary();
        for (auto x : r.getValIterations()) v.val_iterations.push_back(x);
        for (auto x : r.getValLosses()) v.val_losses.push_back(x);
        for (auto z : r.getZones()) v.zones.emplace_back(z);
        for (auto n : r.getNodes()) {
          node_status ns;
          ns.inventory = get_inventory(n.getInventory());
          ns.state = n.getState();
          ns.heartbeat_age_ms = n.getHeartbeatAgeMs();
          ns.ready_roles = n.getReadyRoles();
          for (auto x : n.getRoles())
            ns.roles.push_back({x.getPlanEpoch(), get_role(x.getRole()), get_shape(x.getShape())});
          v.nodes.push_back(std::move(ns));
        }
        for (auto x : r.getEvents()) v.events.emplace_back(x);
        for (auto x : r.getRefusals())
          v.refusals.push_back({x.getPeer(), x.getReason(), x.getUnixMs()});
        e.body = std::move(v);
        break;
      }
      case s::Envelope::Body::TRAINING_JOB: {
        auto j = b.getTrainingJob();
        training_job v;
        v.plan_epoch = j.getPlanEpoch();
        v.plan = get_plan(j.getPlan());
        auto model = get_model(j.getModel());
        if (auto* err = std::get_if<transport_error>(&model)) return *err;
        v.model = std::move(std::get<config::model_shape>(model));
        v.iterations = j.getIterations();
        v.seed = j.getSeed();
        v.optimizer = j.getOptimizer();
        v.learning_rate = j.getLearningRate();
        v.torch_threads = j.getTorchThreads();
        v.timeout_ms = j.getTimeoutMs();
        v.predicted_iteration_s = j.getPredictedIterationS();
        for (auto l : j.getLinks()) {
          config::zone_link link;
          link.from = l.getFrom();
          link.to = l.getTo();
          link.latency_s = l.getLatencyS();
          link.bandwidth_gbytes_per_s = l.getBandwidthGbytesPerS();
          link.egress_usd_per_gb = l.getEgressUsdPerGb();
          v.links.push_back(std::move(link));
        }
        v.start_iteration = j.getStartIteration();
        v.checkpoint_dir = j.getCheckpointDir();
        v.checkpoint_every = j.getCheckpointEvery();
        v.restore_dir = j.getRestoreDir();
        for (auto f : j.getRestoreFiles()) v.restore_files.emplace_back(f);
        for (auto h : j.getRestoreHolders()) v.restore_holders.emplace_back(h);
        v.data_path = j.getDataPath();
        switch (j.getDataFormat()) {
          case s::DataFormat::TEXT: v.data_format = config::data_format::text; break;
          case s::DataFormat::TOKENS_U16: v.data_format = config::data_format::tokens_u16; break;
          case s::DataFormat::TOKENS_U32: v.data_format = config::data_format::tokens_u32; break;
          default:
            return transport_error{errc::invalid_message,
                                   "training job: unknown data format " +
                                     std::to_string(static_cast<unsigned>(j.getDataFormat()))};
        }
        v.validation_fraction = j.getValidationFraction();
        v.min_learning_rate = j.getMinLearningRate();
        v.warmup_iterations = j.getWarmupIterations();
        v.decay_iterations = j.getDecayIterations();
        v.beta1 = j.getBeta1();
        v.beta2 = j.getBeta2();
        v.weight_decay = j.getWeightDecay();
        v.grad_clip = j.getGradClip();
        v.eval_every = j.getEvalEvery();
        v.eval_batches = j.getEvalBatches();
        for (auto n : j.getPeerNodes()) v.peer_nodes.emplace_back(n);
        for (auto a : j.getPeerAddresses()) v.peer_addresses.emplace_back(a);
        for (auto d : j.getKeepCheckpointDirs()) v.keep_checkpoint_dirs.emplace_back(d);
        e.body = std::move(v);
        break;
      }
      case s::Envelope::Body::TRAIN_REPORT: {
        auto r = b.getTrainReport();
        e.body = train_report{r.getPlanEpoch(), r.getRank(),    get_role(r.getRole()),
                              r.getIteration(), r.getLoss(),    r.getComputeS(),
                              r.getSendWaitS(), r.getRecvWaitS(), r.getAllreduceS(),
                              r.getTotalS(),    r.getTokens(),  r.getError(),
                              r.getCheckpointFile(), r.getHasValLoss(), r.getValLoss(),
                              static_cast<std::int32_t>(r.getKind()), r.getPhase(),
                              r.getBlamedNode(), r.getBytes()};
        break;
      }
      case s::Envelope::Body::TELEMETRY: {
        auto t = b.getTelemetry();
        e.body = iteration_telemetry{t.getPlanEpoch(), t.getIteration(), get_role(t.getRole()),
                                     t.getComputeS(),  t.getSendWaitS(), t.getRecvWaitS(),
                                     t.getAllreduceS(), t.getIterationS(), t.getLoss()};
        break;
      }
      case s::Envelope::Body::PREEMPTION: {
        auto p = b.getPreemption();
        e.body = preemption_notice{p.getNodeId(), p.getSecondsLeft(), p.getReason()};
        break;
      }
      case s::Envelope::Body::SHUTDOWN:
        e.body = shutdown_notice{b.getShutdown().getReason()};
        break;
      case s::Envelope::Body::STORE_REQUEST: {
        auto r = b.getStoreRequest();
        e.body = store_request{r.getRequestId(), r.getPlanEpoch(), r.getKey(), r.getSet(),
                               chars_of(r.getValue()), r.getTimeoutMs(), r.getNode()};
        break;
      }
      case s::Envelope::Body::STORE_REPLY: {
        auto r = b.getStoreReply();
        e.body = store_reply{r.getRequestId(), r.getFound(), chars_of(r.getValue()),
                             r.getError()};
        break;
      }
      default:
        return invalid("message from '" + e.sender + "' has unknown variant " +
                       std::to_string(static_cast<unsigned>(b.which())) +
                       " (a newer peer?)");
    }
    return e;
  });
  return out;
}

result<envelope> decode(std::span<const std::byte> bytes) {
  auto out = decode_envelope(bytes);
  if (auto* err = std::get_if<transport_error>(&out)) return err->to_error();
  return std::move(std::get<envelope>(out));
}

std::vector<std::byte> encode_tensor_header(const tensor_descriptor& d) {
  capnp::MallocMessageBuilder mb;
  auto h = mb.initRoot<s::TensorHeader>();
  h.setDtype(static_cast<s::DType>(static_cast<std::uint16_t>(d.type)));
  auto shape = h.initShape(static_cast<unsigned>(d.shape.size()));
  for (unsigned i = 0; i < d.shape.size(); ++i) shape.set(i, d.shape[i]);
  h.setTag(d.tag);
  h.setName(d.name);
  h.setBytes(d.bytes);
  return to_bytes(mb);
}

std::variant<tensor_descriptor, transport_error> decode_tensor_header(
    std::span<const std::byte> bytes) {
  auto out = read_flat(bytes, [](capnp::FlatArrayMessageReader& reader)
                                  -> std::variant<tensor_descriptor, transport_error> {
    auto h = reader.getRoot<s::TensorHeader>();
    auto t = static_cast<std::uint16_t>(h.getDtype());
    if (t > static_cast<std::uint16_t>(dtype::u8))
      return invalid("tensor header has unknown dtype " + std::to_string(t));
    tensor_descriptor d;
    d.type = static_cast<dtype>(t);
    for (auto x : h.getShape()) d.shape.push_back(x);
    d.tag = h.getTag();
    d.name = h.getName();
    d.bytes = h.getBytes();
    return d;
  });
  return out;
}

}  // namespace sailor::comm
