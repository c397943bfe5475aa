@0xc4f1a2b3d5e6f708;
# Every message between Sailor processes. Control messages travel as one Envelope; tensor
# payloads travel as raw bytes next to a TensorHeader, never inside a message.
# Bump `protocol_version` in transport.hpp when a change is not backward compatible.

$import "/capnp/c++.capnp".namespace("sailor::comm::schema");

# ---- Transport handshake (sent by the transport itself, before any user message) ----

struct Hello {
  magic @0 :UInt64;          # 0x5341494c4f520001 ("SAILOR" + 1)
  protocolVersion @1 :UInt32;
  name @2 :Text;
  zone @3 :Text;
  nonce @4 :Data;            # the client's challenge (empty: no job token; see comm/auth.hpp)
}

struct HelloReply {
  accepted @0 :Bool;
  reason @1 :Text;           # why it was refused
  protocolVersion @2 :UInt32;
  name @3 :Text;
  zone @4 :Text;
  nonce @5 :Data;            # the server's challenge (empty: no job token)
  proof @6 :Data;            # HMAC of the job token over the transcript (comm/auth.hpp)
}

enum DType { f32 @0; f16 @1; bf16 @2; f64 @3; i64 @4; i32 @5; i8 @6; u8 @7; }

struct TensorHeader {
  dtype @0 :DType;
  shape @1 :List(Int64);
  tag @2 :UInt64;
  name @3 :Text;
  bytes @4 :UInt64;
}

# ---- Inventory and membership ----

struct Device {
  index @0 :Int32;
  gpuType @1 :Text;
  memoryBytes @2 :UInt64;
  kind @3 :Text;             # "cpu" (emulates a GPU) or "cuda"
}

struct NodeInventory {
  nodeId @0 :Text;
  host @1 :Text;
  zone @2 :Text;
  address @3 :Text;          # host:port where the node's transport listens
  devices @4 :List(Device);
  gpuType @5 :Text;          # the node's GPU type (also set on each device)
  checkpoints @6 :List(Text);  # checkpoint shards in its state folder (relative paths)
}

struct Join { inventory @0 :NodeInventory; }

struct Accept {
  nodeId @0 :Text;
  coordinator @1 :Text;      # the actor that accepted the node (its supervisor)
  heartbeatIntervalS @2 :Float64;
  zoneActor @3 :Text;        # the actor heartbeats go to (the node's zone coordinator)
  heartbeatTimeoutS @4 :Float64;
}

enum RefuseReason { protocolVersion @0; unknownMessage @1; invalidMessage @2; duplicateNode @3; unknownZone @4; shuttingDown @5; other @6; }

struct Refuse {
  reason @0 :RefuseReason;
  detail @1 :Text;
}

struct Heartbeat {
  nodeId @0 :Text;
  sequence @1 :UInt64;
  sentUnixNs @2 :Int64;
}

# ---- Plan and roles (mirrors sailor::config::plan) ----

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

struct Plan {
  microBatch @0 :Int32;
  globalBatch @1 :Int32;
  stages @2 :List(StagePlan);
  hasEstimate @3 :Bool;
  estimate @4 :PlanEstimate;
}

struct Role {
  stage @0 :Int32;
  replica @1 :Int32;
  tpRank @2 :Int32;
  nodeId @3 :Text;
  device @4 :Int32;
}

struct Peer {
  role @0 :Role;
  address @1 :Text;
}

struct Assignment {
  planEpoch @0 :UInt64;
  plan @1 :Plan;
  roles @2 :List(Role);      # the roles this node takes (one per device used)
  peers @3 :List(Peer);      # every role of the plan and where it can be reached
}

# What a role runs, besides where it sits: its replica's TP degree and its stage's layers.
struct StageShape {
  tp @0 :Int32;
  firstLayer @1 :Int32;
  numLayers @2 :Int32;
  microBatch @3 :Int32;
  numStages @4 :Int32;
  gpuType @5 :Text;
  zone @6 :Text;
}

struct StageReady {
  planEpoch @0 :UInt64;
  role @1 :Role;
  shape @2 :StageShape;
}

struct StageFailed {
  planEpoch @0 :UInt64;
  role @1 :Role;
  shape @2 :StageShape;
  reason @3 :Text;
}

struct IterationTelemetry {
  planEpoch @0 :UInt64;
  iteration @1 :Int64;
  role @2 :Role;
  computeS @3 :Float64;
  sendWaitS @4 :Float64;
  recvWaitS @5 :Float64;
  allreduceS @6 :Float64;
  iterationS @7 :Float64;
  loss @8 :Float64;
}

struct PreemptionNotice {
  nodeId @0 :Text;
  secondsLeft @1 :Float64;
  reason @2 :Text;
}

struct Shutdown { reason @0 :Text; }

# ---- Status (sailor status <-> coordinator) ----

struct StatusRequest { token @0 :Int32; }   # any number; tests echo it

struct RoleStatus {
  planEpoch @0 :UInt64;
  role @1 :Role;
  shape @2 :StageShape;
}

struct NodeStatus {
  inventory @0 :NodeInventory;
  state @1 :Text;            # joined, assigned, ready, lost
  heartbeatAgeMs @2 :Int64;  # -1: none received yet
  roles @3 :List(RoleStatus);
  readyRoles @4 :Int32;
}

# A peer refused at the door (bad version, unknown zone, garbage bytes).
struct RefusalRecord {
  peer @0 :Text;             # its address (host:port) or its node name
  reason @1 :Text;
  unixMs @2 :Int64;          # when it was refused
}

struct StatusReply {
  phase @0 :Text;            # collecting, planning, assigning, running, waiting
  planEpoch @1 :UInt64;
  quorum @2 :Int32;
  stages @3 :Int32;
  replicas @4 :Int32;
  rolesTotal @5 :Int32;
  rolesReady @6 :Int32;
  planSummary @7 :Text;
  zones @8 :List(Text);
  nodes @9 :List(NodeStatus);
  events @10 :List(Text);    # most recent last
  refusals @11 :List(RefusalRecord);  # most recent last
  trainingCompleted @12 :Int32;  # iterations completed (any plan), when training
  trainingTotal @13 :Int32;      # iterations asked for; 0: not training
  trainingLoss @14 :Float64;     # loss of the newest completed iteration
  trainingSummary @15 :Text;     # one line for people
  valIterations @16 :List(Int64);  # the validation curve: iterations completed at each pass
  valLosses @17 :List(Float64);    # and its loss
}

# ---- Training (coordinator -> node agents, and their per-iteration reports) ----

enum Precision { fp32 @0; fp16 @1; bf16 @2; }

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
  arch @13 :Architecture;     # the block family (config/model.hpp)
  bias @14 :Bool = true;      # biases in linear layers and norms
  normEps @15 :Float64 = 1e-5;
  ropeTheta @16 :Float64 = 10000;
}

enum Architecture { gpt2 @0; opt @1; llama @2; }
enum DataFormat { text @0; tokensU16 @1; tokensU32 @2; }

struct TrainingJob {
  planEpoch @0 :UInt64;
  plan @1 :Plan;
  model @2 :ModelShape;
  unusedStoreDir @3 :Text;   # protocol 2's FileStore folder; ranks meet through the coordinator's store now
  iterations @4 :Int32;
  seed @5 :UInt64;
  optimizer @6 :Text;        # adamw or sgd
  learningRate @7 :Float64;
  torchThreads @8 :Int32;
  timeoutMs @9 :Int64;       # bound on every wait for a peer
  predictedIterationS @10 :Float64;
  links @11 :List(ZoneLink);  # links between the plan's zones, for emulated link shaping
  startIteration @12 :Int32;  # resume: the checkpoint taken after this many iterations
  checkpointDir @13 :Text;    # plan-independent checkpoints (empty: none)
  checkpointEvery @14 :Int32;
  restoreDir @15 :Text;       # the folder holding the checkpoint to resume from
  restoreFiles @16 :List(Text);    # its shard files (relative to each node's state folder)
  restoreHolders @17 :List(Text);  # one per file: host:port of a node's shard server holding it
  # The job's data (empty path: the built-in synthetic stream). Every node reads the file at
  # this path: the coordinator sends the path, never the data.
  dataPath @18 :Text;
  dataFormat @19 :DataFormat;
  validationFraction @20 :Float64 = 0.1;
  # The schedule around learningRate (its peak) and AdamW's settings (config/job.hpp).
  minLearningRate @21 :Float64 = -1;   # < 0: no decay
  warmupIterations @22 :Int32;
  decayIterations @23 :Int32;
  beta1 @24 :Float64 = 0.9;
  beta2 @25 :Float64 = 0.999;
  weightDecay @26 :Float64;
  gradClip @27 :Float64 = 1.0;         # 0: no clipping
  evalEvery @28 :Int32;                # validation loss every this many iterations (0: never)
  evalBatches @29 :Int32 = 1;
  peerNodes @30 :List(Text);       # every node with a role in the plan
  peerAddresses @31 :List(Text);   # one per node: its shard server's host:port (reachability check)
  keepCheckpointDirs @32 :List(Text);  # the job's checkpoint folders still needed; others go
}

# A link between two zones as training carries it (constant bandwidth; a curve stays behind).
struct ZoneLink {
  from @0 :Text;
  to @1 :Text;
  latencyS @2 :Float64;
  bandwidthGbytesPerS @3 :Float64;
  egressUsdPerGb @4 :Float64;
}

struct TrainReport {
  planEpoch @0 :UInt64;
  rank @1 :Int32;
  role @2 :Role;             # nodeId, stage, replica, tpRank
  iteration @3 :Int64;
  loss @4 :Float64;
  computeS @5 :Float64;
  sendWaitS @6 :Float64;
  recvWaitS @7 :Float64;
  allreduceS @8 :Float64;
  totalS @9 :Float64;
  tokens @10 :Int64;
  error @11 :Text;           # non-empty: the rank failed
  checkpointFile @12 :Text;   # newest shard this rank has in place (relative path), or empty;
                              # its node's shard server (inventory address) serves it
  hasValLoss @13 :Bool;       # a validation pass ran after this iteration
  valLoss @14 :Float64;
  kind @15 :TrainReportKind;  # what the report says (a failure whatever its iteration)
  phase @16 :Text;            # failed: the step ("setup", "restore", "iteration"); reached: the step done
  blamedNode @17 :Text;       # failed: the peer node the rank could not reach, or empty
  # --- recovery from the survivors' memory (issue 12) ---
  bytes @18 :Int64;           # snapshot: the shard's size; reached "restore": bytes fetched
}

enum TrainReportKind {
  iteration @0;         # an iteration completed (measurements)
  failed @1;            # the rank stopped (error, phase)
  checkpointFailed @2;  # writing its checkpoint shard failed (error); it trains on
  reached @3;           # a start-up step (phase) is done
  # --- recovery from the survivors' memory (issue 12) ---
  snapshot @4;          # the rank's plan ended: its state after `iteration` completed
                        # iterations is held in memory (checkpointFile), or none (error)
}

# The rendezvous store the coordinator serves to the ranks of every node (Gloo's and NCCL's
# address exchange), per plan version. A get waits until the key is set or timeoutMs passes.
struct StoreRequest {
  requestId @0 :UInt64;      # echoed in the reply
  planEpoch @1 :UInt64;      # the scope: keys of plan versions no longer current are dropped
  key @2 :Text;
  set @3 :Bool;              # true: set key to value; false: get key (waiting up to timeoutMs)
  value @4 :Data;
  timeoutMs @5 :Int64;
  node @6 :Text;             # the node whose rank asks (checked against the connection's node)
}

struct StoreReply {
  requestId @0 :UInt64;
  found @1 :Bool;            # false: the get timed out (or the scope is gone)
  value @2 :Data;
  error @3 :Text;
}

# Version 3: the rendezvous store; the node's advertised address travels in its inventory.
# Version 2: destination, zoneActor, stage shapes, status, stage failures and training.
struct Envelope {
  protocolVersion @0 :UInt32;
  sender @1 :Text;           # the sending actor's name
  destination @11 :Text;     # the receiving actor's name in the peer process
  body :union {
    join @2 :Join;
    accept @3 :Accept;
    refuse @4 :Refuse;
    heartbeat @5 :Heartbeat;
    assignment @6 :Assignment;
    stageReady @7 :StageReady;
    telemetry @8 :IterationTelemetry;
    preemption @9 :PreemptionNotice;
    shutdown @10 :Shutdown;
    stageFailed @12 :StageFailed;
    statusRequest @13 :StatusRequest;
    statusReply @14 :StatusReply;
    trainingJob @15 :TrainingJob;
    trainReport @16 :TrainReport;
    storeRequest @17 :StoreRequest;
    storeReply @18 :StoreReply;
  }
}
