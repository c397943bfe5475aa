@0xac5dad85fd9d34cc;
# Every control message between Sailor processes: the one source of the protocol.
#
# Each struct here has exactly one C++ struct in sailor/protocol/messages.hpp, field for field
# (names in snake_case), and one field list in protocol/src/codec_fields.hpp that both the
# encoder and the decoder walk (a field added here without its line there fails
# codec_fields.test.cpp). A process sends one Envelope per frame over comm's transport (its
# control messages); bulk tensors travel beside it as tensor frames, not in here.
#
# Version 4: one struct per message (the runtime's), refusal reasons, the notice deadline;
#            no plan inside the training job (the role assignment of the same plan holds it).
# Version 3: the rendezvous store; the node's advertised address travels in its inventory.

$import "/capnp/c++.capnp".namespace("sailor::protocol::schema");

# ---- nodes ---------------------------------------------------------------------------------

struct Device {
  index @0 :Int32;
  kind @1 :Text;              # "cpu" (emulates a GPU) or "cuda"
  memoryBytes @2 :UInt64;
}

struct NodeInventory {
  name @0 :Text;
  zone @1 :Text;
  gpuType @2 :Text;
  host @3 :Text;
  devices @4 :List(Device);
  address @5 :Text;           # host:port of the node's shard server (its advertised host)
  checkpoints @6 :List(Text); # shards in its state folder (relative paths)
}

struct JoinRequest {
  version @0 :UInt16;
  inventory @1 :NodeInventory;
  lastPlanVersion @2 :Int64;  # the newest plan version the node's ranks ran (0: none)
}

struct JoinAccepted {
  node @0 :Text;
  zoneActor @1 :Text;         # the actor heartbeats go to (the node's zone coordinator)
  heartbeatIntervalMs @2 :Int64;
  heartbeatTimeoutMs @3 :Int64;
}

enum RefuseReason {
  other @0; protocolVersion @1; invalidMessage @2; duplicateNode @3; unknownZone @4;
  shuttingDown @5; unauthorized @6;
}

struct JoinRefused {
  reason @0 :Text;            # for people
  code @1 :RefuseReason;      # for programs
}

struct Heartbeat {
  node @0 :Text;
  seq @1 :UInt64;
}

# ---- plans and roles ---------------------------------------------------------------------

struct Replica {
  gpuType @0 :Text;
  zone @1 :Text;
  tp @2 :Int32;
  nodes @3 :List(Text);
  devices @4 :List(Int32);
}

struct StagePlan {
  firstLayer @0 :Int32;
  numLayers @1 :Int32;
  recompute @2 :Bool;
  replicas @3 :List(Replica);
}

struct PlanEstimate {
  iterationTimeS @0 :Float64;
  throughputItersPerS @1 :Float64;
  costPerIterationUsd @2 :Float64;
  costPerHourUsd @3 :Float64;
  peakMemoryBytes @4 :Float64;
}

# DiLoCo across regions (config::local_sgd_plan).
struct LocalSgdRegion {
  name @0 :Text;
  zones @1 :List(Text);
}

struct LocalSgd {
  innerSteps @0 :Int32;
  regions @1 :List(LocalSgdRegion);
}

struct Plan {
  microBatch @0 :Int32;
  globalBatch @1 :Int32;
  stages @2 :List(StagePlan);
  hasEstimate @3 :Bool;
  estimate @4 :PlanEstimate;
  hasLocalSgd @5 :Bool;
  localSgd @6 :LocalSgd;
}

# One device's share of one replica of one stage. Inside a RoleAssignment only the place
# (stage, replica, tpRank, device) travels: the rest follows from the plan beside it.
struct StageRole {
  planVersion @0 :Int64;
  stage @1 :Int32;
  replica @2 :Int32;
  tpRank @3 :Int32;
  tp @4 :Int32;
  device @5 :Int32;
  firstLayer @6 :Int32;
  numLayers @7 :Int32;
  microBatch @8 :Int32;
  numStages @9 :Int32;
  gpuType @10 :Text;
  zone @11 :Text;
}

struct RoleAssignment {
  planVersion @0 :Int64;
  roles @1 :List(StageRole);  # places only (see StageRole)
  plan @2 :Plan;
}

struct StageReady {
  node @0 :Text;
  role @1 :StageRole;
}

struct StageFailed {
  node @0 :Text;
  role @1 :StageRole;
  reason @2 :Text;
}

struct PreemptionNotice {
  node @0 :Text;
  reason @1 :Text;
  secondsLeft @2 :Float64;    # until the node goes (0: unknown)
}

# Why the coordinator lets a node go (the node's exit follows from it).
enum ShutdownKind { released @0; jobFinished @1; stopped @2; declaredLost @3; }

struct ShutdownNotice {
  reason @0 :Text;
  kind @1 :ShutdownKind;      # a peer that predates the field sends released
}

# ---- status ------------------------------------------------------------------------------

struct StatusRequest { unused @0 :Int32; }

struct PeerRefused {
  peer @0 :Text;              # its address (host:port) or its node name
  reason @1 :Text;
  unixMs @2 :Int64;
}

struct NodeStatus {
  inventory @0 :NodeInventory;
  state @1 :Text;             # joined, assigned, ready, lost
  heartbeatAgeMs @2 :Int64;   # -1: none received yet
  roles @3 :List(StageRole);
  readyRoles @4 :Int32;
}

struct ClusterStatus {
  phase @0 :Text;             # collecting, planning, assigning, running, waiting
  planVersion @1 :Int64;
  quorum @2 :Int32;
  stages @3 :Int32;
  replicas @4 :Int32;
  rolesTotal @5 :Int32;
  rolesReady @6 :Int32;
  planSummary @7 :Text;
  zones @8 :List(Text);
  nodes @9 :List(NodeStatus);
  events @10 :List(Text);     # most recent last
  refusals @11 :List(PeerRefused);
  trainingCompleted @12 :Int32;
  trainingTotal @13 :Int32;
  trainingLoss @14 :Float64;
  trainingSummary @15 :Text;
  valIterations @16 :List(Int64);
  valLosses @17 :List(Float64);
  checkpointIterations @18 :Int64;  # the newest complete checkpoint (0: none)
  checkpointBehind @19 :Int64;      # completed iterations it is behind
  checkpointAgeS @20 :Float64 = -1; # seconds since it was complete (-1: none)
  checkpointEvery @21 :Int32;       # the plan's interval (0: no checkpoints)
  checkpointWarning @22 :Text;      # set when more than 3 intervals behind
}

# ---- training ----------------------------------------------------------------------------

enum Precision { fp32 @0; fp16 @1; bf16 @2; }
enum Architecture { gpt2 @0; opt @1; llama @2; }
enum DataFormat { text @0; tokensU16 @1; tokensU32 @2; }

struct ModelShape {
  name @0 :Text;
  sailorName @1 :Text;
  numLayers @2 :Int32;
  hidden @3 :Int32;
  heads @4 :Int32;
  kvHeads @5 :Int32;
  ffnHidden @6 :Int32;
  gatedMlp @7 :Bool;
  sequence @8 :Int32;
  vocabulary @9 :Int32;
  precision @10 :Precision;
  tiedEmbeddings @11 :Bool;
  learnedPositions @12 :Bool;
  arch @13 :Architecture;
  bias @14 :Bool = true;
  normEps @15 :Float64 = 1e-5;
  ropeTheta @16 :Float64 = 10000;
  geluTanh @17 :Bool;         # gpt2: GELU's tanh approximation (activation: gelu_new)
}

struct ZoneLink {
  from @0 :Text;
  to @1 :Text;
  latencyS @2 :Float64;
  bandwidthGbytesPerS @3 :Float64;
  egressUsdPerGb @4 :Float64;
}

struct DataSource {
  path @0 :Text;              # empty: the built-in synthetic stream
  format @1 :DataFormat;
  validationFraction @2 :Float64 = 0.1;
  tokenizer @3 :TokenizerKind;
  tokenizerVocab @4 :Text;    # gpt2Bpe: vocab.json
  tokenizerMerges @5 :Text;   # gpt2Bpe: merges.txt
  tokenizerModel @6 :Text;    # sentencepiece: the .model file
}

enum TokenizerKind { characters @0; gpt2Bpe @1; sentencepiece @2; }

enum OuterOptimizer { nesterov @0; sgd @1; }
enum DeltaCompression { none @0; int8 @1; }

# DiLoCo's outer optimizer (config::data_parallel_options); its inner steps and regions are
# the plan's.
struct OuterOptions {
  optimizer @0 :OuterOptimizer;
  lr @1 :Float64 = 0.7;
  momentum @2 :Float64 = 0.9;
  compression @3 :DeltaCompression;
  fragments @4 :Int32 = 1;
  overlapSteps @5 :Int32 = 1;
}

# What every rank of a plan trains. Its plan is the one in the RoleAssignment of the same
# planVersion, which follows it on the same connection.
struct TrainingJob {
  planVersion @0 :Int64;
  model @1 :ModelShape;
  iterations @2 :Int32;
  seed @3 :UInt64;
  optimizer @4 :Text;         # adamw or sgd
  learningRate @5 :Float64;
  torchThreads @6 :Int32;
  timeoutMs @7 :Int64;        # bound on every wait for a peer
  predictedIterationS @8 :Float64;
  links @9 :List(ZoneLink);   # for emulated link shaping between zones
  startIteration @10 :Int32;  # resume from the checkpoint after this many iterations
  checkpointDir @11 :Text;
  checkpointEvery @12 :Int32;
  restoreDir @13 :Text;
  restoreFiles @14 :List(Text);
  restoreHolders @15 :List(Text);   # one per file: a shard server's host:port
  data @16 :DataSource;
  minLearningRate @17 :Float64 = -1;
  warmupIterations @18 :Int32;
  decayIterations @19 :Int32;
  beta1 @20 :Float64 = 0.9;
  beta2 @21 :Float64 = 0.999;
  weightDecay @22 :Float64;
  gradClip @23 :Float64 = 1.0;
  evalEvery @24 :Int32;
  evalBatches @25 :Int32 = 1;
  peerNodes @26 :List(Text);
  peerAddresses @27 :List(Text);
  keepCheckpointDirs @28 :List(Text);
  initFrom @29 :Text;         # a Hugging Face checkpoint the ranks start from (empty: none)
  outer @30 :OuterOptions;    # DiLoCo's outer optimizer (used when the plan has localSgd)
}

struct TrainReport {
  planVersion @0 :Int64;
  node @1 :Text;
  rank @2 :Int32;
  stage @3 :Int32;
  replica @4 :Int32;
  tpRank @5 :Int32;
  iteration @6 :Int64;
  loss @7 :Float64;
  computeS @8 :Float64;
  sendWaitS @9 :Float64;
  recvWaitS @10 :Float64;
  allReduceS @11 :Float64;
  totalS @12 :Float64;
  tokens @13 :Int64;
  error @14 :Text;
  checkpointFile @15 :Text;
  hasValLoss @16 :Bool;
  valLoss @17 :Float64;
  kind @18 :Int32;            # a report_kind (messages.hpp); readers ignore values they lack
  phase @19 :Text;
  blamedNode @20 :Text;
  bytes @21 :Int64;
  dataS @22 :Float64;         # the iteration's phases not in the fields above
  optimizerS @23 :Float64;
  checkpointS @24 :Float64;
}

# The newest checkpoint of a plan complete across its stages, as the supervisor's holdings
# see it (supervisor -> every node of the plan): writers keep their shards of it and of every
# newer iteration of `folder`, whatever their count, since it is what a whole stage lost
# without notice resumes from.
struct CheckpointKept {
  planVersion @0 :Int64;
  iterations @1 :Int32;       # completed iterations it holds
  folder @2 :Text;            # the plan's checkpoint folder, relative to the state folders
}

# The rendezvous store the coordinator serves to the ranks (Gloo's and NCCL's address
# exchange), scoped by plan version. A get waits until the key is set or timeoutMs passes.
struct StoreRequest {
  requestId @0 :UInt64;
  planVersion @1 :Int64;
  key @2 :Text;
  set @3 :Bool;
  value @4 :Data;
  timeoutMs @5 :Int64;
  node @6 :Text;              # the asking node (checked against the connection's node)
}

struct StoreReply {
  requestId @0 :UInt64;
  found @1 :Bool;
  value @2 :Data;
  error @3 :Text;
}

# ---- a scheduler in its own process (actors/remote_scheduler.hpp) -------------------------
# The typed scheduler protocol of actors/scheduler_api.hpp, between the coordinator's
# scheduler gate and a scheduler that connected like a node (its connection named
# "scheduler" in the transport handshake, with the job token).

enum PlacementKind { pin @0; forbid @1; clear @2; }

struct PlacementRule {
  kind @0 :PlacementKind;
  node @1 :Text;
  stage @2 :Int32;            # -1: every stage
}

struct PlanRequest {
  requestId @0 :Int64;
  reason @1 :Text;
  nodes @2 :List(NodeInventory);
  hasCurrent @3 :Bool;
  current @4 :Plan;
  rules @5 :List(PlacementRule);
  objective @6 :List(Text);   # key=value
  modelLayers @7 :Int32;
}

struct PlanReply {
  requestId @0 :Int64;
  ok @1 :Bool;
  plan @2 :Plan;
  error @3 :Text;
}

enum AvailabilityKind { joined @0; preemptionNotice @1; lost @2; }

struct AvailabilityEvent {
  kind @0 :AvailabilityKind;
  node @1 :NodeInventory;
  reason @2 :Text;
  deadlineMs @3 :Int64;
}

struct IterationTelemetry {
  planVersion @0 :Int64;
  iteration @1 :Int64;
  node @2 :Text;
  stage @3 :Int32;
  replica @4 :Int32;
  measuredS @5 :Float64;
  computeS @6 :Float64;
  waitS @7 :Float64;
  allReduceS @8 :Float64;
  predictedS @9 :Float64;
  loss @10 :Float64;
}

struct PlanApplied {
  planVersion @0 :Int64;
  plan @1 :Plan;
  by @2 :Text;
}

struct PlanRefused {
  requestId @0 :Int64;
  reason @1 :Text;
}

struct ReplanFinished {
  planVersion @0 :Int64;
  reason @1 :Text;
  recoveryS @2 :Float64;
}

struct SchedulerHello { name @0 :Text; }

enum SchedulerCommand {
  replanNow @0; drainNode @1; evictNode @2; pin @3; forbid @4; clear @5; objectiveChange @6;
}

struct SchedulerRequest {
  requestId @0 :Int64;
  kind @1 :SchedulerCommand;
  node @2 :Text;
  reason @3 :Text;
  deadlineMs @4 :Int64;
  stage @5 :Int32;
  key @6 :Text;
  value @7 :Text;
}

struct SchedulerReply {
  requestId @0 :Int64;        # 0: the answer to the hello
  accepted @1 :Bool;
  reason @2 :Text;
}

# ---- link probes between nodes (issue 14) -------------------------------------------------
# The coordinator has the nodes of a zone pair probe the link between them, over their data
# transport (shaped by `links` when the links are emulated): first node B is asked to serve
# (it answers with its responder's address), then node A to probe that address (it answers
# with the latency and the bandwidth curve).

struct LinkProbeRequest {
  probeId @0 :UInt64;
  kind @1 :Text;              # serve or probe
  peer @2 :Text;              # the other node of the pair
  peerZone @3 :Text;
  address @4 :Text;           # probe: the responder's host:port
  links @5 :List(ZoneLink);   # the emulated links (empty: unshaped)
  timeoutMs @6 :Int64;        # bound on every wait of the probe
}

struct LinkProbeResult {
  probeId @0 :UInt64;
  node @1 :Text;              # the answering node
  error @2 :Text;             # empty: done
  address @3 :Text;           # serve: where its responder listens
  latencyS @4 :Float64;       # probe: one way
  sizes @5 :List(Float64);    # probe: message bytes, smallest first
  bytesPerS @6 :List(Float64);  # probe: one per size
  elapsedS @7 :Float64;
}

struct Envelope {
  protocolVersion @0 :UInt16;
  sender @1 :Text;            # the sending actor's name
  destination @2 :Text;       # the receiving actor's name in the peer process
  body :union {
    joinRequest @3 :JoinRequest;
    joinAccepted @4 :JoinAccepted;
    joinRefused @5 :JoinRefused;
    heartbeat @6 :Heartbeat;
    roleAssignment @7 :RoleAssignment;
    stageReady @8 :StageReady;
    stageFailed @9 :StageFailed;
    preemptionNotice @10 :PreemptionNotice;
    shutdownNotice @11 :ShutdownNotice;
    statusRequest @12 :StatusRequest;
    clusterStatus @13 :ClusterStatus;
    trainingJob @14 :TrainingJob;
    trainReport @15 :TrainReport;
    storeRequest @16 :StoreRequest;
    storeReply @17 :StoreReply;
    # A scheduler in its own process (scheduler_messages.hpp).
    planRequest @18 :PlanRequest;
    planReply @19 :PlanReply;
    availabilityEvent @20 :AvailabilityEvent;
    iterationTelemetry @21 :IterationTelemetry;
    planApplied @22 :PlanApplied;
    planRefused @23 :PlanRefused;
    replanFinished @24 :ReplanFinished;
    schedulerHello @25 :SchedulerHello;
    schedulerRequest @26 :SchedulerRequest;
    schedulerReply @27 :SchedulerReply;
    # Link probes between nodes (probe_messages.hpp).
    linkProbeRequest @28 :LinkProbeRequest;
    linkProbeResult @29 :LinkProbeResult;
    # Training, added after the above (messages.hpp).
    checkpointKept @30 :CheckpointKept;
  }
}
