// The decoder: each schema struct back into its message struct, checking what the schema
// cannot (enum values this build knows, roles inside their plan, the version).

#include <cstring>
#include <optional>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "codec_internal.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol {
namespace {

using namespace detail;

// A message that decodes but says something this build cannot accept.
struct refused {
  std::string why;
};

std::vector<char> chars_of(capnp::Data::Reader d) {
  return std::vector<char>(reinterpret_cast<const char*>(d.begin()),
                           reinterpret_cast<const char*>(d.end()));
}

node_inventory get(s::NodeInventory::Reader r) {
  node_inventory v;
  v.name = r.getName();
  v.zone = r.getZone();
  v.gpu_type = r.getGpuType();
  v.host = r.getHost();
  for (auto d : r.getDevices())
    v.devices.push_back(device_info{d.getIndex(), d.getKind(), d.getMemoryBytes()});
  v.address = r.getAddress();
  v.checkpoints = list_of<std::string>(r.getCheckpoints());
  return v;
}

stage_role get(s::StageRole::Reader r) {
  return stage_role{r.getPlanVersion(), r.getStage(),      r.getReplica(),   r.getTpRank(),
                    r.getTp(),          r.getDevice(),     r.getFirstLayer(), r.getNumLayers(),
                    r.getMicroBatch(),  r.getNumStages(),  r.getGpuType(),   r.getZone()};
}

config::plan get(s::Plan::Reader r) {
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
      rep.nodes = list_of<std::string>(rr.getNodes());
      rep.devices = list_of<int>(rr.getDevices());
      st.replicas.push_back(std::move(rep));
    }
    p.stages.push_back(std::move(st));
  }
  if (r.getHasEstimate()) {
    auto e = r.getEstimate();
    config::plan_estimate est;
    est.iteration_time_s = e.getIterationTimeS();
    est.throughput_iters_per_s = e.getThroughputItersPerS();
    est.cost_per_iteration_usd = e.getCostPerIterationUsd();
    est.cost_per_hour_usd = e.getCostPerHourUsd();
    est.peak_memory_bytes = e.getPeakMemoryBytes();
    p.estimate = std::move(est);
  }
  return p;
}

std::variant<config::model_shape, refused> get(s::ModelShape::Reader r) {
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
  if (!from_wire(precisions, r.getPrecision(), m.precision))
    return refused{"model '" + m.name + "' has unknown precision " +
                   std::to_string(static_cast<unsigned>(r.getPrecision()))};
  m.tied_embeddings = r.getTiedEmbeddings();
  m.learned_positions = r.getLearnedPositions();
  if (!from_wire(architectures, r.getArch(), m.arch))
    return refused{"model '" + m.name + "' has unknown architecture " +
                   std::to_string(static_cast<unsigned>(r.getArch()))};
  m.bias = r.getBias();
  m.norm_eps = r.getNormEps();
  m.rope_theta = r.getRopeTheta();
  return m;
}

// The roles of an assignment are places in its plan: the rest of each role comes from there.
std::variant<role_assignment, refused> get(s::RoleAssignment::Reader r) {
  role_assignment out;
  out.plan_version = r.getPlanVersion();
  out.plan = get(r.getPlan());
  for (auto x : r.getRoles()) {
    int stage = x.getStage(), replica = x.getReplica();
    if (stage < 0 || stage >= out.plan.num_stages() || replica < 0 ||
        replica >= static_cast<int>(out.plan.stages[stage].replicas.size()))
      return refused{"role (stage " + std::to_string(stage) + ", replica " +
                     std::to_string(replica) + ") is not in the plan it came with"};
    auto& st = out.plan.stages[stage];
    auto& rep = st.replicas[replica];
    out.roles.push_back(stage_role{out.plan_version, stage, replica, x.getTpRank(), rep.tp,
                                   x.getDevice(), st.first_layer, st.num_layers,
                                   out.plan.micro_batch, out.plan.num_stages(), rep.gpu_type,
                                   rep.zone});
  }
  return out;
}

cluster_status get(s::ClusterStatus::Reader r) {
  cluster_status v;
  v.phase = r.getPhase();
  v.plan_version = r.getPlanVersion();
  v.quorum = r.getQuorum();
  v.stages = r.getStages();
  v.replicas = r.getReplicas();
  v.roles_total = r.getRolesTotal();
  v.roles_ready = r.getRolesReady();
  v.plan_summary = r.getPlanSummary();
  v.zones = list_of<std::string>(r.getZones());
  for (auto n : r.getNodes()) {
    node_status ns{get(n.getInventory()), n.getState(), n.getHeartbeatAgeMs(), {},
                   n.getReadyRoles()};
    for (auto x : n.getRoles()) ns.roles.push_back(get(x));
    v.nodes.push_back(std::move(ns));
  }
  v.events = list_of<std::string>(r.getEvents());
  for (auto x : r.getRefusals())
    v.refusals.push_back(peer_refused{x.getPeer(), x.getReason(), x.getUnixMs()});
  v.training_completed = r.getTrainingCompleted();
  v.training_total = r.getTrainingTotal();
  v.training_loss = r.getTrainingLoss();
  v.training_summary = r.getTrainingSummary();
  v.val_iterations = list_of<std::int64_t>(r.getValIterations());
  v.val_losses = list_of<double>(r.getValLosses());
  return v;
}

void get_schedule(s::TrainingJob::Reader r, training_job& v) {
  v.min_learning_rate = r.getMinLearningRate();
  v.warmup_iterations = r.getWarmupIterations();
  v.decay_iterations = r.getDecayIterations();
  v.beta1 = r.getBeta1();
  v.beta2 = r.getBeta2();
  v.weight_decay = r.getWeightDecay();
  v.grad_clip = r.getGradClip();
  v.eval_every = r.getEvalEvery();
  v.eval_batches = r.getEvalBatches();
}

std::variant<training_job, refused> get(s::TrainingJob::Reader r) {
  training_job v;
  v.plan_version = r.getPlanVersion();
  auto model = get(r.getModel());
  if (auto* bad = std::get_if<refused>(&model)) return *bad;
  v.model = std::move(std::get<config::model_shape>(model));
  v.iterations = r.getIterations();
  v.seed = r.getSeed();
  v.optimizer = r.getOptimizer();
  v.learning_rate = r.getLearningRate();
  v.torch_threads = r.getTorchThreads();
  v.timeout_ms = r.getTimeoutMs();
  v.predicted_iteration_s = r.getPredictedIterationS();
  v.links = get_zone_links(r.getLinks());
  v.start_iteration = r.getStartIteration();
  v.checkpoint_dir = r.getCheckpointDir();
  v.checkpoint_every = r.getCheckpointEvery();
  v.restore_dir = r.getRestoreDir();
  v.restore_files = list_of<std::string>(r.getRestoreFiles());
  v.restore_holders = list_of<std::string>(r.getRestoreHolders());
  auto data = r.getData();
  v.data.path = data.getPath();
  if (!from_wire(data_formats, data.getFormat(), v.data.format))
    return refused{"training job: unknown data format " +
                   std::to_string(static_cast<unsigned>(data.getFormat()))};
  v.data.validation_fraction = data.getValidationFraction();
  get_schedule(r, v);
  v.peer_nodes = list_of<std::string>(r.getPeerNodes());
  v.peer_addresses = list_of<std::string>(r.getPeerAddresses());
  v.keep_checkpoint_dirs = list_of<std::string>(r.getKeepCheckpointDirs());
  return v;
}

train_report get(s::TrainReport::Reader r) {
  return train_report{r.getPlanVersion(), r.getNode(),       r.getRank(),      r.getStage(),
                      r.getReplica(),     r.getTpRank(),     r.getIteration(), r.getLoss(),
                      r.getComputeS(),    r.getSendWaitS(),  r.getRecvWaitS(), r.getAllReduceS(),
                      r.getTotalS(),      r.getTokens(),     r.getError(),
                      r.getCheckpointFile(), r.getHasValLoss(), r.getValLoss(), r.getKind(),
                      r.getPhase(),       r.getBlamedNode(), r.getBytes()};
}

using body_result = std::variant<message, refused>;

template <class T>
body_result lift(std::variant<T, refused> v) {
  if (auto* bad = std::get_if<refused>(&v)) return *bad;
  return message{std::move(std::get<T>(v))};
}

std::optional<body_result> get(s::Envelope::Body::Reader b) {
  using B = s::Envelope::Body;
  switch (b.which()) {
    case B::JOIN_REQUEST: {
      auto x = b.getJoinRequest();
      return message{join_request{x.getVersion(), get(x.getInventory())}};
    }
    case B::JOIN_ACCEPTED: {
      auto x = b.getJoinAccepted();
      return message{join_accepted{x.getNode(), x.getZoneActor(), x.getHeartbeatIntervalMs(),
                                   x.getHeartbeatTimeoutMs()}};
    }
    case B::JOIN_REFUSED: {
      auto x = b.getJoinRefused();
      join_refused v{x.getReason(), refuse_reason::other};
      from_wire(refuse_reasons, x.getCode(), v.code);  // unknown: other
      return message{std::move(v)};
    }
    case B::HEARTBEAT:
      return message{heartbeat{b.getHeartbeat().getNode(), b.getHeartbeat().getSeq()}};
    case B::ROLE_ASSIGNMENT: return lift(get(b.getRoleAssignment()));
    case B::STAGE_READY:
      return message{stage_ready{b.getStageReady().getNode(), get(b.getStageReady().getRole())}};
    case B::STAGE_FAILED: {
      auto x = b.getStageFailed();
      return message{stage_failed{x.getNode(), get(x.getRole()), x.getReason()}};
    }
    case B::PREEMPTION_NOTICE: {
      auto x = b.getPreemptionNotice();
      return message{preemption_notice{x.getNode(), x.getReason(), x.getSecondsLeft()}};
    }
    case B::SHUTDOWN_NOTICE: return message{shutdown_notice{b.getShutdownNotice().getReason()}};
    case B::STATUS_REQUEST: return message{status_request{b.getStatusRequest().getUnused()}};
    case B::CLUSTER_STATUS: return message{get(b.getClusterStatus())};
    case B::TRAINING_JOB: return lift(get(b.getTrainingJob()));
    case B::TRAIN_REPORT: return message{get(b.getTrainReport())};
    case B::STORE_REQUEST: {
      auto x = b.getStoreRequest();
      return message{store_request{x.getRequestId(), x.getPlanVersion(), x.getKey(), x.getSet(),
                                   chars_of(x.getValue()), x.getTimeoutMs(), x.getNode()}};
    }
    case B::STORE_REPLY: {
      auto x = b.getStoreReply();
      return message{
        store_reply{x.getRequestId(), x.getFound(), chars_of(x.getValue()), x.getError()}};
    }
    case B::CHECKPOINT_KEPT: {
      auto x = b.getCheckpointKept();
      return message{checkpoint_kept{x.getPlanVersion(), x.getIterations(), x.getFolder()}};
    }
    default: break;
  }
  if (auto m = get_scheduler(b))  // the scheduler's messages: codec_scheduler.cpp
    return body_result{std::move(*m)};
  if (auto m = get_probe(b))  // the link probes' messages: codec_probe.cpp
    return body_result{std::move(*m)};
  return std::nullopt;  // a variant this build does not know
}

}  // namespace

std::vector<config::zone_link> detail::get_zone_links(capnp::List<s::ZoneLink>::Reader r) {
  std::vector<config::zone_link> out;
  out.reserve(r.size());
  for (auto l : r) {
    config::zone_link link;
    link.from = l.getFrom();
    link.to = l.getTo();
    link.latency_s = l.getLatencyS();
    link.bandwidth_gbytes_per_s = l.getBandwidthGbytesPerS();
    link.egress_usd_per_gb = l.getEgressUsdPerGb();
    out.push_back(std::move(link));
  }
  return out;
}

node_inventory detail::get_inventory(s::NodeInventory::Reader r) { return get(r); }
config::plan detail::get_plan(s::Plan::Reader r) { return get(r); }

namespace {

decode_error invalid(std::string what) {
  return decode_error{decode_error::kind::invalid, std::move(what)};
}

// A message over its kind's ceiling is refused before any of its fields is read.
std::optional<decode_error> over_limit(s::Envelope::Reader root, std::size_t size) {
  const auto kind = static_cast<std::size_t>(root.getBody().which());
  const auto limit = max_encoded_bytes(kind);
  if (limit == 0 || size <= limit) return std::nullopt;  // an unknown kind is refused below
  return invalid("a " + std::string(kind_name(kind)) + " of " + std::to_string(size) +
                 " bytes, over its limit of " + std::to_string(limit) + " bytes");
}

std::variant<envelope, decode_error> read(s::Envelope::Reader root, std::size_t size) {
  if (auto too_big = over_limit(root, size)) return *too_big;
  envelope e;
  e.version = root.getProtocolVersion();
  e.sender = root.getSender();
  e.destination = root.getDestination();
  if (e.version != protocol_version)
    return decode_error{decode_error::kind::version_mismatch,
                        "message from '" + e.sender + "' speaks protocol version " +
                          std::to_string(e.version) + ", this build speaks " +
                          std::to_string(protocol_version)};
  auto body = get(root.getBody());
  if (!body)
    return invalid("message from '" + e.sender + "' has unknown variant " +
                   std::to_string(static_cast<unsigned>(root.getBody().which())) +
                   " (a newer peer?)");
  if (auto* bad = std::get_if<refused>(&*body))
    return invalid("message from '" + e.sender + "': " + bad->why);
  e.body = std::move(std::get<message>(*body));
  if (e.destination.empty())
    return invalid("message " + std::string(name_of(e.body)) + " from '" + e.sender +
                   "' names no destination actor");
  return e;
}

}  // namespace

std::variant<envelope, decode_error> decode(std::span<const std::byte> bytes) {
  if (bytes.empty()) return invalid("empty message");
  if (bytes.size() % sizeof(capnp::word) != 0)
    return invalid("message of " + std::to_string(bytes.size()) +
                   " bytes is not a whole number of 8-byte words");
  try {
    // Cap'n Proto reads words: copy into aligned storage.
    auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 64 * 1024 * 1024;
    capnp::FlatArrayMessageReader reader(words, opts);
    return read(reader.getRoot<s::Envelope>(), bytes.size());
  } catch (const kj::Exception& e) {
    return invalid(std::string("does not decode: ") + e.getDescription().cStr());
  }
}

}  // namespace sailor::protocol
