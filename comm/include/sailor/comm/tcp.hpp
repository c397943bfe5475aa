#pragma once
/// The plain TCP backend: the same interface over non-blocking sockets and one poll() thread.
/// A fallback where UCX is unavailable, and the baseline of bench/transport.cpp. Payloads are
/// written with writev() straight from the caller's buffer (no copy on the sending side).

#include <memory>

#include "sailor/comm/transport.hpp"

namespace sailor::comm {

/// Creates the TCP transport and starts its progress thread.
result<std::unique_ptr<transport>> make_tcp_transport(const transport_options& options);

}  // namespace sailor::comm
