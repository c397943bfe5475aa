#pragma once
/// The messages between Sailor processes, one plain struct each.
///
/// protocol/schema/messages.capnp is the one source: every struct here is one struct of the
/// schema, field for field, and protocol/codec.hpp encodes and decodes them. The actor runtime
/// sends these structs as CAF messages as they are (actors/messages.hpp registers them), and
/// its bridge puts them on the wire in an `envelope`. Nothing here knows CAF or the transport.
///
///   node --join_request--> supervisor --join_accepted | join_refused--> node
///   node --heartbeat--> zone coordinator
///   supervisor --training_job, then role_assignment--> node (per plan version)
///   node --stage_ready | stage_failed | train_report | preemption_notice--> supervisor
///   rank --store_request--> coordinator's rendezvous store --store_reply--> rank
///   `sailor status` --status_request--> supervisor --cluster_status--> `sailor status`
///   supervisor --checkpoint_kept--> node (every node of the running plan)
///   supervisor --shutdown_notice--> node

#include <cstdint>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::protocol {

/// The version of the messages; a peer speaking another one is refused with both named.
/// 4: one struct per message; refusal codes; the notice deadline; no plan in training_job.
inline constexpr std::uint16_t protocol_version = 4;

// -- nodes ----------------------------------------------------------------------------------

/// One device of a node: `cpu` devices emulate GPUs on machines without them.
struct device_info {
  int index = 0;
  std::string kind;  ///< "cpu" or "cuda"
  std::uint64_t memory_bytes = 0;
  bool operator==(const device_info&) const = default;
};

/// What a node brings: its devices, their GPU type and the zone it runs in.
struct node_inventory {
  std::string name;
  std::string zone;
  std::string gpu_type;
  std::string host;
  std::vector<device_info> devices;
  /// host:port of this node's shard server; host is the address its peers reach it on
  /// (`sailor-node --advertise`), where its collectives listen too.
  std::string address;
  /// The checkpoint shards in the node's state folder (relative paths), so that a
  /// coordinator that restarts learns what the job still holds.
  std::vector<std::string> checkpoints;
  bool operator==(const node_inventory&) const = default;
};

/// First message of a node: asks to join the job.
struct join_request {
  std::uint16_t version = protocol_version;
  node_inventory inventory;
  /// The newest plan version this node's ranks ran, under any coordinator of the job (0:
  /// none): a coordinator that continues the job from its journal refuses a node that claims
  /// a version it never issued.
  std::int64_t last_plan_version = 0;
  bool operator==(const join_request&) const = default;
};

/// The supervisor accepted the node; heartbeats are expected every `heartbeat_interval_ms` to
/// the actor named `zone_actor`.
struct join_accepted {
  std::string node;
  std::string zone_actor;
  std::int64_t heartbeat_interval_ms = 0;
  std::int64_t heartbeat_timeout_ms = 0;
  bool operator==(const join_accepted&) const = default;
};

/// Why a peer was refused, for programs (the text is for people).
enum class refuse_reason : std::int32_t {
  other = 0,
  protocol_version = 1,
  invalid_message = 2,
  duplicate_node = 3,
  unknown_zone = 4,
  shutting_down = 5,
  unauthorized = 6,
};
const char* to_string(refuse_reason r);

/// The supervisor (or the bridge) refused the node.
struct join_refused {
  std::string reason;
  refuse_reason code = refuse_reason::other;
  bool operator==(const join_refused&) const = default;
};

struct heartbeat {
  std::string node;
  std::uint64_t seq = 0;
  bool operator==(const heartbeat&) const = default;
};

// -- plans and roles ------------------------------------------------------------------------

/// What one stage actor runs: one device's share of one replica of one stage.
struct stage_role {
  std::int64_t plan_version = 0;
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;
  int tp = 1;
  int device = 0;
  int first_layer = 0;
  int num_layers = 0;
  int micro_batch = 1;
  int num_stages = 1;
  std::string gpu_type;
  std::string zone;
  bool operator==(const stage_role&) const = default;
};

/// All the roles of one node under one plan (empty: the node idles under this plan), and the
/// plan itself (placed: replicas name their nodes and devices). On the wire a role is its
/// place in the plan; the decoder fills in the rest from the plan and refuses a role that is
/// not in it.
struct role_assignment {
  std::int64_t plan_version = 0;
  std::vector<stage_role> roles;
  config::plan plan;
};

/// A stage actor is set up and ready to run its role.
struct stage_ready {
  std::string node;
  stage_role role;
  bool operator==(const stage_ready&) const = default;
};

/// A stage actor could not take its role.
struct stage_failed {
  std::string node;
  stage_role role;
  std::string reason;
  bool operator==(const stage_failed&) const = default;
};

/// The node is about to go away (spot preemption): re-plan without it.
struct preemption_notice {
  std::string node;
  std::string reason;
  double seconds_left = 0;  ///< until the node goes (the provider's notice); 0: unknown
  bool operator==(const preemption_notice&) const = default;
};

/// Why the coordinator lets a node go; what the node does next follows from it.
enum class shutdown_kind : std::int32_t {
  released = 0,       ///< let go (drained, or the next plan took its state after a notice)
  job_finished = 1,   ///< the coordinator ends and the job finished
  stopped = 2,        ///< the coordinator ends before the job finished
  declared_lost = 3,  ///< it was declared lost (silent past the heartbeat timeout): join again
};
/// "released", "job_finished", "stopped" or "declared_lost".
const char* to_string(shutdown_kind k);

/// The coordinator ends the job or releases the node.
struct shutdown_notice {
  std::string reason;
  shutdown_kind kind = shutdown_kind::released;
  bool operator==(const shutdown_notice&) const = default;
};

// -- status ---------------------------------------------------------------------------------

/// Asks the supervisor for a cluster_status.
struct status_request {
  int unused = 0;
  bool operator==(const status_request&) const = default;
};

/// A peer was refused at the door (bad bytes, wrong version, unknown zone); the supervisor
/// keeps the recent ones for `sailor status`.
struct peer_refused {
  std::string peer;  ///< its address (host:port) or node name
  std::string reason;
  std::int64_t unix_ms = 0;  ///< when (0: stamped by the supervisor on arrival)
  bool operator==(const peer_refused&) const = default;
};

/// One node as the supervisor sees it.
struct node_status {
  node_inventory inventory;
  std::string state;                   ///< joined, assigned, ready, lost
  std::int64_t heartbeat_age_ms = -1;  ///< -1: none received yet
  std::vector<stage_role> roles;
  int ready_roles = 0;
  bool operator==(const node_status&) const = default;
};

/// A snapshot of the job: phase, plan, nodes and recent events.
struct cluster_status {
  std::string phase;  ///< collecting, planning, assigning, running, waiting
  std::int64_t plan_version = 0;
  int quorum = 0;
  int stages = 0;
  int replicas = 0;
  int roles_total = 0;
  int roles_ready = 0;
  std::string plan_summary;
  std::vector<std::string> zones;
  std::vector<node_status> nodes;
  std::vector<std::string> events;     ///< most recent last
  std::vector<peer_refused> refusals;  ///< peers refused at the door, most recent last
  int training_completed = 0;  ///< iterations completed (by any plan), when training
  int training_total = 0;      ///< iterations asked for; 0: not training
  double training_loss = 0;    ///< of the newest completed iteration
  std::string training_summary;
  /// The validation curve (jobs with eval_every): iterations completed at each pass, and its
  /// loss; the same length.
  std::vector<std::int64_t> val_iterations;
  std::vector<double> val_losses;
  /// The newest complete checkpoint of the job while training (what a plan would resume
  /// from): the iterations it holds (0: none yet), how many completed iterations it is behind,
  /// seconds since the supervisor saw it complete (-1: none), the plan's checkpoint_every (0:
  /// the plan writes none) and, when it is more than 3 intervals behind, a warning (else empty).
  std::int64_t checkpoint_iterations = 0;
  std::int64_t checkpoint_behind = 0;
  double checkpoint_age_s = -1;
  int checkpoint_every = 0;
  std::string checkpoint_warning;
  bool operator==(const cluster_status&) const = default;
};

// -- training -------------------------------------------------------------------------------

/// What every rank of plan `plan_version` trains, and how. It reaches a node just before the
/// role_assignment of the same plan version, which carries the plan: `plan` does not travel
/// with the job (the node agent fills it in from the assignment).
struct training_job {
  std::int64_t plan_version = 0;
  config::plan plan;  ///< not on the wire (see above)
  config::model_shape model;
  int iterations = 0;
  std::uint64_t seed = 1;
  std::string optimizer = "adamw";  ///< adamw or sgd
  /// The optimizer's schedule and settings, as the job file gives them. On the wire they stay
  /// flat fields of TrainingJob (codec_fields.hpp maps each member).
  config::optimizer_schedule schedule;
  /// Compute threads of every rank; 0: each node decides (its --threads, else its cores
  /// shared among its ranks).
  int torch_threads = 0;
  std::int64_t timeout_ms = 30000;   ///< bound on every wait for a peer
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
  /// A Hugging Face checkpoint (train/pretrained.hpp) every rank loads its slice of before
  /// the first iteration of a job that starts afresh (start_iteration 0); a path every node
  /// reads, as `data`'s. Empty: the weights drawn from the seed.
  std::string init_from;
  /// DiLoCo's outer optimizer, used when the plan has local_sgd (its across_regions and
  /// inner_steps do not travel: the plan's local_sgd says both).
  config::data_parallel_options outer;
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
  /// The rank's iteration `iteration` reached a loss or gradient norm over the plan that is
  /// not finite (`error` says which): it took no step and stopped, keeping no state.
  diverged = 5,
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
  /// The iteration's phases besides compute, waits and all-reduces: assembling the
  /// micro-batches' tokens, the norm, clipping and optimizer step, and the training thread's
  /// share of taking a checkpoint.
  double data_s = 0;
  double optimizer_s = 0;
  double checkpoint_s = 0;
  bool operator==(const train_report&) const = default;

  report_kind what() const {
    if (kind == static_cast<std::int32_t>(report_kind::iteration) && !error.empty())
      return report_kind::failed;  // a sender that predates `kind`
    return static_cast<report_kind>(kind);  // a value not listed is ignored by readers
  }
};

/// The newest checkpoint of plan `plan_version` complete across its stages (every writer's
/// shard held by a node in the job: its own or a copy), sent to every node of the plan when
/// it advances. A whole stage lost without notice resumes from it, so each writer keeps its
/// shard of it and of every newer iteration of `folder`, however many it keeps besides.
struct checkpoint_kept {
  std::int64_t plan_version = 0;
  int iterations = 0;  ///< completed iterations it holds
  std::string folder;  ///< the plan's checkpoint folder (training_job::checkpoint_dir)
  bool operator==(const checkpoint_kept&) const = default;
};

/// A rank's request to the coordinator's rendezvous store, scoped by plan version: set `key`
/// to `value`, or get it, waiting up to `timeout_ms` for it to be set.
struct store_request {
  std::uint64_t request_id = 0;
  std::int64_t plan_version = 0;
  std::string key;
  bool set = false;
  std::vector<char> value;
  std::int64_t timeout_ms = 0;
  std::string node;  ///< the node whose rank asks; the bridge checks it is the connection's
  bool operator==(const store_request&) const = default;
};

struct store_reply {
  std::uint64_t request_id = 0;
  bool found = false;  ///< false: the get timed out, or its plan version is no longer kept
  std::vector<char> value;
  std::string error;
  bool operator==(const store_reply&) const = default;
};

}  // namespace sailor::protocol
