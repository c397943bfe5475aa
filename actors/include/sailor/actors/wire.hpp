#pragma once
/// How actor messages are written into link frames.
///
/// A frame is exactly one Cap'n Proto `Envelope` of the comm module (comm/schema/
/// messages.capnp, comm/messages.hpp): the protocol version, the name of the sending actor and
/// of the receiving actor in the peer process, and the message as one variant of the
/// envelope's union. Every wire message of messages.hpp and train/messages.hpp has its
/// variant; every field travels. Local messages cannot be encoded.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "sailor/config/error.hpp"

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

/// Decodes a frame. Errors (invalid_input) for garbage, a truncated envelope, another
/// protocol version (the message names both), a variant this build does not know and a
/// message whose fields contradict each other (a role outside the plan it came with).
result<envelope> decode_envelope(caf::actor_system& system, const std::vector<char>& frame);

/// Encodes like encode_envelope but stamps protocol version `version`; for tests of refusals.
result<std::vector<char>> encode_envelope_as_version(std::uint32_t version,
                                                     const std::string& source,
                                                     const std::string& destination,
                                                     const caf::message& body);

}  // namespace sailor::actors
