#pragma once
/// The UCX backend: one ucp context and worker, driven by one progress thread owned by the
/// transport object. Control messages are UCX active messages; tensor payloads are active
/// messages whose data is the caller's buffer (large ones by rendezvous, so UCX moves the
/// bytes straight from the sender's memory into the receiver's buffer).
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
  /// Payloads of at least this size are forced onto the rendezvous protocol; 0 lets UCX
  /// choose (it uses rendezvous for large payloads by itself, above its tuned threshold,
  /// which measured faster on loopback from 16 KiB to 1 MiB than forcing it at 64 KiB).
  std::size_t rndv_threshold_bytes = 0;
  /// The IPv4 address this transport's peers reach it on (the node's advertised address).
  /// When neither `ucx_config` nor the environment (UCX_NET_DEVICES) names the devices, UCX
  /// is limited to the interface holding this address: left to itself it also offers peers
  /// its other interfaces (loopback among them), which another host cannot reach.
  std::string host;
};

/// The name of the network interface that holds IPv4 address `host` ("lo" for 127.0.0.1);
/// empty when none does.
std::string interface_holding(const std::string& host);

/// Creates the UCX transport and starts its progress thread.
result<std::unique_ptr<transport>> make_ucx_transport(const ucx_options& options);

}  // namespace sailor::comm
