#pragma once
/// The one codec of the protocol: an `envelope` (the protocol version, the sending and the
/// receiving actor's names, and one message) as the Cap'n Proto `Envelope` of
/// protocol/schema/messages.capnp, in flat-array bytes.
///
/// Encoding never fails. Decoding never throws: garbage, a truncated message, another
/// protocol version, a variant this build does not know and a message whose fields contradict
/// each other (a role outside the plan it came with) are errors that say which, so that the
/// receiver can refuse the peer with a reason.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/protocol/messages.hpp"
#include "sailor/protocol/probe_messages.hpp"
#include "sailor/protocol/scheduler_messages.hpp"

namespace sailor::protocol {

/// Every message that crosses processes, in the order of the schema's union.
using message =
  std::variant<join_request, join_accepted, join_refused, heartbeat, role_assignment,
               stage_ready, stage_failed, preemption_notice, shutdown_notice, status_request,
               cluster_status, training_job, train_report, store_request, store_reply,
               // a scheduler in its own process (scheduler_messages.hpp)
               plan_request, plan_reply, availability_event, iteration_telemetry, plan_applied,
               plan_refused, replan_finished, scheduler_hello, scheduler_request,
               scheduler_reply,
               // link probes between nodes (probe_messages.hpp)
               link_probe_request, link_probe_result,
               // training, added after the above (messages.hpp)
               checkpoint_kept>;

/// One message as it travels.
struct envelope {
  std::uint16_t version = protocol_version;
  std::string sender;       ///< the sending actor's name
  std::string destination;  ///< the receiving actor's name in the peer process
  message body;
};

/// The name of a message's type ("join_request", "heartbeat", ...), for logs and errors.
const char* name_of(const message& m);

/// Encodes `e` with the version it holds (tests of refusals stamp others).
std::vector<std::byte> encode(const envelope& e);

/// Why bytes did not decode.
struct decode_error {
  enum class kind { invalid, version_mismatch } what = kind::invalid;
  std::string message;
};

/// Decodes bytes from a peer.
std::variant<envelope, decode_error> decode(std::span<const std::byte> bytes);

}  // namespace sailor::protocol
