#include "sailor/comm/error.hpp"

namespace sailor::comm {

const char* to_string(errc code) {
  switch (code) {
    case errc::closed: return "closed";
    case errc::disconnected: return "disconnected";
    case errc::refused: return "refused";
    case errc::protocol_mismatch: return "protocol_mismatch";
    case errc::invalid_message: return "invalid_message";
    case errc::timed_out: return "timed_out";
    case errc::invalid_argument: return "invalid_argument";
    case errc::transport_failure: return "transport_failure";
  }
  return "unknown";
}

std::string transport_error::to_string() const {
  return std::string(comm::to_string(code)) + ": " + message;
}

sailor::error transport_error::to_error() const {
  error_kind kind = error_kind::failed;
  switch (code) {
    case errc::disconnected:
    case errc::closed: kind = error_kind::disconnected; break;
    case errc::invalid_message:
    case errc::protocol_mismatch:
    case errc::invalid_argument: kind = error_kind::invalid_input; break;
    default: break;
  }
  return sailor::error::of(kind, "", "", to_string());
}

}  // namespace sailor::comm
