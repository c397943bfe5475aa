#include "sailor/config/error.hpp"

namespace sailor {

const char* to_string(error_kind kind) {
  switch (kind) {
    case error_kind::invalid_input: return "invalid input";
    case error_kind::not_found: return "not found";
    case error_kind::infeasible: return "infeasible";
    case error_kind::failed: return "failed";
    case error_kind::disconnected: return "disconnected";
    case error_kind::unimplemented: return "not implemented";
  }
  return "unknown";
}

std::string error::to_string() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
  }
  if (!field.empty()) out += field + ": ";
  out += message;
  return out;
}

}  // namespace sailor
