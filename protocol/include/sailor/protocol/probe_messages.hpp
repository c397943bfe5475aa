#pragma once
/// Link probes between nodes (issue 14), as wire messages: the coordinator has the nodes of
/// a zone pair measure the link between them over their own data transport.
///
///   coordinator --link_probe_request{serve}--> node B: opens its probe responder
///   node B --link_probe_result{address}--> coordinator
///   coordinator --link_probe_request{probe, address}--> node A: probes B (comm/link_probe.hpp)
///   node A --link_probe_result{latency, bandwidth curve}--> coordinator
///
/// Either answer may carry an error instead; an answer that does not come within the
/// coordinator's bound counts as one.

#include <cstdint>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"

namespace sailor::protocol {

struct link_probe_request {
  std::uint64_t probe_id = 0;
  std::string kind;  ///< "serve" or "probe"
  std::string peer;  ///< the other node of the pair
  std::string peer_zone;
  std::string address;  ///< probe: the responder's host:port
  /// The emulated links (the link shaper's, both ends); empty: the transport unshaped. A
  /// bandwidth curve does not travel: the constant is used.
  std::vector<config::zone_link> links;
  std::int64_t timeout_ms = 5000;  ///< bound on every wait of the probe
  bool operator==(const link_probe_request& o) const {
    if (links.size() != o.links.size()) return false;
    for (std::size_t i = 0; i < links.size(); ++i)
      if (links[i].from != o.links[i].from || links[i].to != o.links[i].to ||
          links[i].latency_s != o.links[i].latency_s ||
          links[i].bandwidth_gbytes_per_s != o.links[i].bandwidth_gbytes_per_s ||
          links[i].egress_usd_per_gb != o.links[i].egress_usd_per_gb)
        return false;
    return probe_id == o.probe_id && kind == o.kind && peer == o.peer &&
           peer_zone == o.peer_zone && address == o.address && timeout_ms == o.timeout_ms;
  }
};

struct link_probe_result {
  std::uint64_t probe_id = 0;
  std::string node;     ///< the answering node
  std::string error;    ///< empty: done
  std::string address;  ///< serve: where the node's responder listens
  double latency_s = 0;  ///< probe: one way
  std::vector<double> sizes;        ///< probe: message bytes, smallest first
  std::vector<double> bytes_per_s;  ///< probe: one per size
  double elapsed_s = 0;
  bool operator==(const link_probe_result&) const = default;
};

}  // namespace sailor::protocol
