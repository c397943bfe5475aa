#pragma once
/// Errors of the process-to-process layer, as values. Every transport callback that can fail
/// takes a `transport_error` (or an empty optional for success); none throws.

#include <optional>
#include <string>

#include "sailor/config/error.hpp"

namespace sailor::comm {

/// What went wrong, classified by what the owner should do about it.
enum class errc {
  closed,             ///< the local side closed the connection (or the transport) first
  disconnected,       ///< the peer went away or its endpoint failed: treat the peer as dead
  refused,            ///< the peer refused the handshake (reason in the message)
  protocol_mismatch,  ///< the peer speaks another protocol version
  invalid_message,    ///< bytes that do not decode (garbage, truncated, unknown variant)
  timed_out,          ///< the handshake did not finish in time
  invalid_argument,   ///< bad address or option passed by the caller
  transport_failure,  ///< the backend (UCX, sockets) reported another failure
};

const char* to_string(errc code);

/// An error of a connection, a send or a receive.
struct transport_error {
  errc code = errc::transport_failure;
  std::string message;  ///< what happened, naming the peer where known

  /// `code: message`, for logs.
  std::string to_string() const;
  /// The project-wide error value (kind chosen from `code`).
  sailor::error to_error() const;
};

/// Success (empty) or the error of an operation.
using op_status = std::optional<transport_error>;

}  // namespace sailor::comm
