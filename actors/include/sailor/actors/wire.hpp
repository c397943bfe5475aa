#pragma once
/// How actor messages are written into link frames.
///
/// A frame is exactly one protocol `envelope` (protocol/codec.hpp): the protocol version, the
/// name of the sending actor and of the receiving actor in the peer process, and the message.
/// The wire messages are protocol/'s structs; this file only moves them in and out of CAF
/// messages. Local messages cannot be encoded.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "sailor/config/error.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::actors {

struct envelope {
  std::uint16_t version = 0;
  std::string source;
  std::string destination;
  caf::message body;
};

/// Encodes `body`; fails with `unimplemented` when its type is not a wire message.
/// (`system` is kept for callers; the encoding does not need it.)
result<std::vector<char>> encode_envelope(caf::actor_system& system, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body);

/// Encodes like encode_envelope but stamps protocol version `version`; for tests of refusals.
result<std::vector<char>> encode_envelope_as_version(std::uint16_t version,
                                                     const std::string& source,
                                                     const std::string& destination,
                                                     const caf::message& body);

/// A frame that does not decode, and the refusal it earns the peer.
struct decode_failure {
  protocol::refuse_reason code = protocol::refuse_reason::invalid_message;
  std::string message;
};

/// Decodes a frame: garbage, a truncated envelope, another protocol version (the message
/// names both), a variant this build does not know and a message whose fields contradict
/// each other (a role outside the plan it came with) are failures.
std::variant<envelope, decode_failure> decode_frame(const std::vector<char>& frame);

/// decode_frame as a result (invalid_input on failure).
result<envelope> decode_envelope(caf::actor_system& system, const std::vector<char>& frame);

}  // namespace sailor::actors
