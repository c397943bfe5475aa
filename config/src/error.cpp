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

error error::of(error_kind kind, std::string file, std::string field, std::string message) {
  error e;
  e.kind = kind;
  e.message = std::move(message);
  e.file = std::move(file);
  e.field = std::move(field);
  return e;
}

error error::invalid_input(std::string file, std::string field, std::string message) {
  return of(error_kind::invalid_input, std::move(file), std::move(field), std::move(message));
}

error error::invalid_input(std::string field, std::string message) {
  return of(error_kind::invalid_input, "", std::move(field), std::move(message));
}

error error::not_found(std::string file, std::string field, std::string message) {
  return of(error_kind::not_found, std::move(file), std::move(field), std::move(message));
}

error error::infeasible(std::string field, std::string message) {
  return of(error_kind::infeasible, "", std::move(field), std::move(message));
}

error error::failed(std::string message) { return of(error_kind::failed, "", "", std::move(message)); }

error error::disconnected(std::string message) {
  return of(error_kind::disconnected, "", "", std::move(message));
}

error error::unimplemented(std::string message) {
  return of(error_kind::unimplemented, "", "", std::move(message));
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
