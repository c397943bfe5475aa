#pragma once
// A TCP transport for tests that move bytes between endpoints of this process on loopback:
// named `name`, in zone "zone-a", authenticated by `token` (at least 32 characters).

#include <memory>
#include <string>

#include <doctest/doctest.h>

#include "sailor/comm/tcp.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::testing {

inline std::unique_ptr<comm::transport> loopback_tcp(const std::string& name,
                                                     const std::string& token) {
  comm::transport_options o;
  o.local_name = name;
  o.local_zone = "zone-a";
  o.token = token;
  auto t = comm::make_tcp_transport(o);
  REQUIRE(t);
  return std::move(*t);
}

}  // namespace sailor::testing
