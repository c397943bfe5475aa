#include "sailor/comm/transport.hpp"

#include <charconv>

namespace sailor::comm {

std::string address::to_string() const { return host + ":" + std::to_string(port); }

result<address> address::parse(std::string_view text) {
  auto colon = text.rfind(':');
  sailor::error err{error_kind::invalid_input, "", "", 0, "address"};
  if (colon == std::string_view::npos || colon == 0) {
    err.message = "expected host:port, got '" + std::string(text) + "'";
    return err;
  }
  unsigned port = 0;
  auto digits = text.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty() ||
      port > 65535) {
    err.message = "expected a port 0..65535 after ':', got '" + std::string(digits) + "'";
    return err;
  }
  address a;
  a.host = std::string(text.substr(0, colon));
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  a.port = static_cast<std::uint16_t>(port);
  return a;
}

const char* to_string(connection_state s) {
  switch (s) {
    case connection_state::connecting: return "connecting";
    case connection_state::open: return "open";
    case connection_state::closed: return "closed";
    case connection_state::failed: return "failed";
  }
  return "unknown";
}

}  // namespace sailor::comm
