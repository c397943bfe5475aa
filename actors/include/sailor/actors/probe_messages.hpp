#pragma once
/// The link probes' wire messages (protocol/probe_messages.hpp) as CAF messages: their
/// `inspect` overloads (CAF 0.17). actors/messages.cpp registers them.

#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "sailor/actors/inspect.hpp"
#include "sailor/protocol/probe_messages.hpp"

namespace sailor::protocol {

// The links travel as columns (a bandwidth curve stays behind, as on the wire): zone_link's
// own inspect lives with the training messages.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_probe_request& x) {
  std::vector<std::string> from, to;
  std::vector<double> latency, bandwidth, egress;
  for (const auto& l : x.links) {
    from.push_back(l.from);
    to.push_back(l.to);
    latency.push_back(l.latency_s);
    bandwidth.push_back(l.bandwidth_gbytes_per_s);
    egress.push_back(l.egress_usd_per_gb);
  }
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.links.clear();
    for (std::size_t i = 0; i < from.size() && i < to.size() && i < latency.size() &&
                            i < bandwidth.size() && i < egress.size();
         ++i) {
      config::zone_link l;
      l.from = from[i];
      l.to = to[i];
      l.latency_s = latency[i];
      l.bandwidth_gbytes_per_s = bandwidth[i];
      l.egress_usd_per_gb = egress[i];
      x.links.push_back(std::move(l));
    }
    return caf::none;
  });
  return f(caf::meta::type_name("link_probe_request"), x.probe_id, x.kind, x.peer, x.peer_zone,
           x.address, from, to, latency, bandwidth, egress, x.timeout_ms, restore);
}

SAILOR_INSPECT(link_probe_result, x.probe_id, x.node, x.error, x.address, x.latency_s, x.sizes,
               x.bytes_per_s, x.elapsed_s)

}  // namespace sailor::protocol
