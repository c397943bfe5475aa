#pragma once
/// Plain C++ values of every control message between processes, and their encoding as one
/// Cap'n Proto `Envelope` (comm/schema/messages.capnp). Encoding never fails; decoding
/// returns an error (never throws) for garbage, a truncated message, another protocol version
/// or a variant this build does not know, so the receiver can refuse with a clear reason.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "sailor/comm/error.hpp"
#include "sailor/comm/tensor.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::comm {

struct device_info {
  int index = 0;
  std::string gpu_type;
  std::uint64_t memory_bytes = 0;
  std::string kind;  ///< "cpu" (a CPU standing for a GPU) or "cuda"
  bool operator==(const device_info&) const = default;
};

/// What a node brings: its devices, where it is and where it listens.
struct node_inventory {
  std::string node_id;
  std::string host;
  std::string zone;
  std::string address;  ///< host:port of the node's shard server; its collectives listen on host
  std::vector<device_info> devices;
  std::string gpu_type;  ///< the node's GPU type (kept when it has no devices)
  std::vector<std::string> checkpoints;  ///< shards in its state folder (relative paths)
  bool operator==(const node_inventory&) const = default;
};

struct join_request {
  node_inventory inventory;
  bool operator==(const join_request&) const = default;
};

struct join_accept {
  std::string node_id;
  std::string coordinator;  ///< the actor that accepted the node
  double heartbeat_interval_s = 1.0;
  std::string zone_actor;   ///< the actor heartbeats go to (the node's zone coordinator)
  double heartbeat_timeout_s = 0;
  bool operator==(const join_accept&) const = default;
};

enum class refuse_reason {
  protocol_version,
  unknown_message,
  invalid_message,
  duplicate_node,
  unknown_zone,
  shutting_down,
  other
};
const char* to_string(refuse_reason r);

struct refusal {
  refuse_reason reason = refuse_reason::other;
  std::string detail;
  bool operator==(const refusal&) const = default;
};

struct heartbeat {
  std::string node_id;
  std::uint64_t sequence = 0;
  std::int64_t sent_unix_ns = 0;
  bool operator==(const heartbeat&) const = default;
};

/// Where one GPU sits in a plan.
struct role {
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;
  std::string node_id;
  int device = 0;
  bool operator==(const role&) const = default;
};

struct peer_role {
  role where;
  std::string address;  ///< host:port of the node holding that role
  bool operator==(const peer_role&) const = default;
};

/// A plan and this node's part in it.
struct role_assignment {
  std::uint64_t plan_epoch = 0;
  config::plan plan;
  std::vector<role> roles;
  std::vector<peer_role> peers;
};

/// What a role runs besides where it sits: its replica's TP degree and its stage's layers.
struct stage_shape {
  int tp = 1;
  int first_layer = 0;
  int num_layers = 0;
  int micro_batch = 1;
  int num_stages = 1;
  std::string gpu_type;
  std::string zone;
  bool operator==(const stage_shape&) const = default;
};

struct stage_ready {
  std::uint64_t plan_epoch = 0;
  role where;
  stage_shape shape;
  bool operator==(const stage_ready&) const = default;
};

/// A stage could not take its role.
struct stage_failed {
  std::uint64_t plan_epoch = 0;
  role where;
  stage_shape shape;
  std::string reason;
  bool operator==(const stage_failed&) const = default;
};

/// Timings of one iteration on one GPU.
struct iteration_telemetry {
  std::uint64_t plan_epoch = 0;
  std::int64_t iteration = 0;
  role where;
  double compute_s = 0;
  double send_wait_s = 0;
  double recv_wait_s = 0;
  double allreduce_s = 0;
  double iteration_s = 0;
  double loss = 0;
  bool operator==(const iteration_telemetry&) const = default;
};

struct preemption_notice {
  std::string node_id;
  double seconds_left = 0;
  std::string reason;
  bool operator==(const preemption_notice&) const = default;
};

struct shutdown_notice {
  std::string reason;
  bool operator==(const shutdown_notice&) const = default;
};

/// Asks the coordinator for a status_reply; `token` is any number (echoed by tests).
struct status_request {
  int token = 0;
  bool operator==(const status_request&) const = default;
};

/// One role of a node as the coordinator sees it.
struct role_status {
  std::uint64_t plan_epoch = 0;
  role where;
  stage_shape shape;
  bool operator==(const role_status&) const = default;
};

struct node_status {
  node_inventory inventory;
  std::string state;                   ///< joined, assigned, ready, lost
  std::int64_t heartbeat_age_ms = -1;  ///< -1: none received yet
  std::vector<role_status> roles;
  int ready_roles = 0;
  bool operator==(const node_status&) const = default;
};

/// A peer refused at the door (bad version, unknown zone, garbage bytes).
struct refusal_record {
  std::string peer;  ///< its address (host:port) or its node name
  std::string reason;
  std::int64_t unix_ms = 0;  ///< when
  bool operator==(const refusal_record&) const = default;
};

/// A snapshot of the job, for `sailor status`.
struct status_reply {
  std::string phase;
  std::uint64_t plan_epoch = 0;
  int quorum = 0;
  int stages = 0;
  int replicas = 0;
  int roles_total = 0;
  int roles_ready = 0;
  std::string plan_summary;
  std::vector<std::string> zones;
  std::vector<node_status> nodes;
  std::vector<std::string> events;        ///< most recent last
  std::vector<refusal_record> refusals;   ///< most recent last
  int training_completed = 0;             ///< iterations completed, when training
  int training_total = 0;                 ///< iterations asked for; 0: not training
  double training_loss = 0;               ///< of the newest completed iteration
  std::string training_summary;           ///< one line for people
  /// The validation curve: iterations completed at each pass, and its loss.
  std::vector<std::int64_t> val_iterations;
  std::vector<double> val_losses;
  bool operator==(const status_reply&) const = default;
};

/// What every rank of a plan trains, and how (see actors/train/messages.hpp).
struct training_job {
  std::uint64_t plan_epoch = 0;
  config::plan plan;
  config::model_shape model;
  int iterations = 0;
  std::uint64_t seed = 1;
  std::string optimizer;
  double learning_rate = 0;
  int torch_threads = 1;
  std::int64_t timeout_ms = 0;
  double predicted_iteration_s = 0;
  std::vector<config::zone_link> links;  ///< for emulated link shaping between stages
  int start_iteration = 0;               ///< resume from the checkpoint after this many
  std::string checkpoint_dir;            ///< plan-independent checkpoints (empty: none)
  int checkpoint_every = 1;
  std::string restore_dir;               ///< holds the checkpoint to resume from
  std::vector<std::string> restore_files;    ///< its shard files
  std::vector<std::string> restore_holders;  ///< one per file: a shard server's host:port
  /// The job's data file (every node reads it at this path); empty: the synthetic stream.
  std::string data_path;
  config::data_format data_format = config::data_format::text;
  double validation_fraction = 0.1;
  /// The schedule around learning_rate (its peak) and the optimizer's settings.
  double min_learning_rate = -1;  ///< < 0: no decay
  int warmup_iterations = 0;
  int decay_iterations = 0;
  double beta1 = 0.9, beta2 = 0.999;
  double weight_decay = 0;
  double grad_clip = 1.0;  ///< 0: no clipping
  int eval_every = 0;      ///< validation loss every this many iterations (0: never)
  int eval_batches = 1;
  std::vector<std::string> peer_nodes;       ///< every node with a role in the plan
  std::vector<std::string> peer_addresses;   ///< one per node: its shard server's host:port
  std::vector<std::string> keep_checkpoint_dirs;  ///< the job's checkpoint folders still needed
};

/// One rank's measurements of one iteration, or its failure (`error` non-empty).
struct train_report {
  std::uint64_t plan_epoch = 0;
  int rank = 0;
  role where;  ///< node_id, stage, replica, tp_rank
  std::int64_t iteration = 0;
  double loss = 0;
  double compute_s = 0;
  double send_wait_s = 0;
  double recv_wait_s = 0;
  double allreduce_s = 0;
  double total_s = 0;
  std::int64_t tokens = 0;
  std::string error;
  std::string checkpoint_file;  ///< newest shard in place (relative path), or empty
  bool has_val_loss = false;    ///< a validation pass ran after this iteration
  double val_loss = 0;
  /// 0 iteration, 1 failed, 2 checkpoint write failed, 3 start-up step reached
  /// (messages.capnp TrainReportKind; the runtime's report_kind).
  std::int32_t kind = 0;
  std::string phase;        ///< failed: where; reached: the step done
  std::string blamed_node;  ///< failed: the peer node it could not reach, or empty
  std::int64_t bytes = 0;   ///< snapshot: the shard's size; reached restore: bytes fetched
  bool operator==(const train_report&) const = default;
};

/// A rank's request to the coordinator's rendezvous store (see messages.capnp). The same
/// struct is the runtime's message: it has one definition.
struct store_request {
  std::uint64_t request_id = 0;
  std::uint64_t plan_epoch = 0;
  std::string key;
  bool set = false;  ///< true: set `key` to `value`; false: get `key`, waiting up to timeout_ms
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

using message_body =
  std::variant<join_request, join_accept, refusal, heartbeat, role_assignment, stage_ready,
               iteration_telemetry, preemption_notice, shutdown_notice, stage_failed,
               status_request, status_reply, training_job, train_report, store_request,
               store_reply>;

/// One control message as it travels: version, sending and receiving actor, body.
struct envelope {
  std::uint32_t version = 1;  ///< protocol_version of the sender
  std::string sender;         ///< the sending actor's name
  message_body body;
  std::string destination;    ///< the receiving actor's name in the peer process
};

/// The name of the body's variant ("join", "heartbeat", ...), for logs.
const char* body_name(const message_body& body);

/// Encodes an envelope (its `version` as given) into Cap'n Proto flat-array bytes.
std::vector<std::byte> encode(const envelope& e);
/// Encodes `body` from `sender` (to `destination`) with this build's protocol version.
std::vector<std::byte> encode(const std::string& sender, message_body body,
                              const std::string& destination = {});

/// Decodes bytes from a peer. Errors: errc::invalid_message (garbage, truncated, unknown
/// variant), errc::protocol_mismatch (another version; the message names both).
result<envelope> decode(std::span<const std::byte> bytes);
/// The same, with the transport's error code kept (for replying with a refusal).
std::variant<envelope, transport_error> decode_envelope(std::span<const std::byte> bytes);

/// Tensor descriptors as the Cap'n Proto header that travels next to a payload.
std::vector<std::byte> encode_tensor_header(const tensor_descriptor& d);
std::variant<tensor_descriptor, transport_error> decode_tensor_header(
    std::span<const std::byte> bytes);

}  // namespace sailor::comm
