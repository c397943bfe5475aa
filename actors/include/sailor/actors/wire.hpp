#pragma once
/// How actor messages are written into link frames.
///
/// A frame carries one envelope: the protocol version, the kind of message, the name of the
/// sending actor and of the receiving actor in the peer process, and the message body.
///
///   u16 version | u16 kind | string source | string destination | body
///
/// The body is encoded with CAF's binary serializer from the message's `inspect` overload.
/// (The comm module's Cap'n Proto envelope is meant to replace this encoding; the envelope's
/// fields are the same.) Only the wire messages of messages.hpp can be encoded.

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
result<std::vector<char>> encode_envelope(caf::actor_system& system, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body);

/// Decodes a frame. A frame of another protocol version decodes its header only (version,
/// names) and fails with `invalid_input` naming both versions; garbage fails too.
result<envelope> decode_envelope(caf::actor_system& system, const std::vector<char>& frame);

/// Writes a frame by hand with an arbitrary version and kind; for tests of refusal paths.
std::vector<char> encode_raw_frame(std::uint16_t version, std::uint16_t kind,
                                   const std::string& source, const std::string& destination,
                                   const std::vector<char>& body);

/// The kind number of a join_request (for tests that forge frames).
std::uint16_t join_request_kind();

}  // namespace sailor::actors
