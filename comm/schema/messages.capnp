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
}

struct HelloReply {
  accepted @0 :Bool;
  reason @1 :Text;           # why it was refused
  protocolVersion @2 :UInt32;
  name @3 :Text;
  zone @4 :Text;
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
}

struct NodeInventory {
  nodeId @0 :Text;
  host @1 :Text;
  zone @2 :Text;
  address @3 :Text;          # host:port where the node's transport listens
  devices @4 :List(Device);
}

struct Join { inventory @0 :NodeInventory; }

struct Accept {
  nodeId @0 :Text;
  coordinator @1 :Text;
  heartbeatIntervalS @2 :Float64;
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

struct StageReady {
  planEpoch @0 :UInt64;
  role @1 :Role;
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

struct Envelope {
  protocolVersion @0 :UInt32;
  sender @1 :Text;
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
  }
}
