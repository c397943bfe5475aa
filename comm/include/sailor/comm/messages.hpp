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
#include "sailor/config/plan.hpp"

namespace sailor::comm {

struct device_info {
  int index = 0;
  std::string gpu_type;
  std::uint64_t memory_bytes = 0;
  bool operator==(const device_info&) const = default;
};

/// What a node brings: its devices, where it is and where it listens.
struct node_inventory {
  std::string node_id;
  std::string host;
  std::string zone;
  std::string address;  ///< host:port of the node's transport listener
  std::vector<device_info> devices;
  bool operator==(const node_inventory&) const = default;
};

struct join_request {
  node_inventory inventory;
  bool operator==(const join_request&) const = default;
};

struct join_accept {
  std::string node_id;
  std::string coordinator;
  double heartbeat_interval_s = 1.0;
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

struct stage_ready {
  std::uint64_t plan_epoch = 0;
  role where;
  bool operator==(const stage_ready&) const = default;
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

using message_body = std::variant<join_request, join_accept, refusal, heartbeat, role_assignment,
                                  stage_ready, iteration_telemetry, preemption_notice, shutdown_notice>;

/// One control message as it travels: version, sender and body.
struct envelope {
  std::uint32_t version = 1;  ///< protocol_version of the sender
  std::string sender;
  message_body body;
};

/// The name of the body's variant ("join", "heartbeat", ...), for logs.
const char* body_name(const message_body& body);

/// Encodes an envelope (its `version` as given) into Cap'n Proto flat-array bytes.
std::vector<std::byte> encode(const envelope& e);
/// Encodes `body` from `sender` with this build's protocol version.
std::vector<std::byte> encode(const std::string& sender, message_body body);

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
