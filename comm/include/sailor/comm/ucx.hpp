#pragma once
/// The UCX backend: one ucp context and worker, driven by one progress thread owned by the
/// transport object. Control messages are UCX active messages; tensor payloads are active
/// messages whose data is the caller's buffer (rendezvous above `rndv_threshold_bytes`, so
/// UCX moves the bytes straight from the sender's memory into the receiver's buffer).
/// UCX reads its usual environment (UCX_TLS, UCX_NET_DEVICES, ...); `ucx_config` overrides.

#include <map>
#include <memory>
#include <string>

#include "sailor/comm/transport.hpp"

namespace sailor::comm {

struct ucx_options {
  transport_options common;
  /// UCX configuration entries set on top of the environment, e.g. {"TLS", "tcp,sm,self"}.
  std::map<std::string, std::string> ucx_config;
  /// Payloads of at least this size are forced onto the rendezvous protocol.
  std::size_t rndv_threshold_bytes = 64 * 1024;
};

/// Creates the UCX transport and starts its progress thread.
result<std::unique_ptr<transport>> make_ucx_transport(const ucx_options& options);

}  // namespace sailor::comm
