#pragma once
/// Link probes (issue 14): what a link between two zones gives, measured over the transport
/// itself (so under link shaping the probe measures the shaped link).
///
///   prober                                   responder (probe_responder())
///     connect --------------------------------> accept
///     ping (control, 8 bytes) x pings ------>   echo it back        => latency: half the
///     <-------------------------------------    (median round trip)
///     tensor of N bytes ---------------------->  ack (control, 8 bytes: N)
///     <--------------------------------------    => bandwidth at N: N / (time - round trip)
///
/// Sizes go from small to large; a size whose predicted time (round trip plus N at the
/// bandwidth measured so far) would pass the budget is left out, so the probe stays short on
/// slow links. Every wait is bounded by `timeout_s`; a probe that fails or times out returns
/// an error naming the address and what failed, and measures nothing.

#include <cstdint>
#include <utility>
#include <vector>

#include "sailor/comm/transport.hpp"
#include "sailor/config/cluster.hpp"

namespace sailor::comm {

struct probe_options {
  /// Transfer sizes, smallest first.
  std::vector<std::uint64_t> sizes = {64u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20};
  int pings = 5;          ///< small round trips; the smallest gives the latency
  /// Each size is sent as a train of back-to-back messages of at least this many bytes (one
  /// message at sizes above it), so that its time stands above a round trip's noise.
  std::uint64_t train_bytes = 2u << 20;
  double budget_s = 0.6;  ///< sizes that would take the probe past this are left out (the first two never)
  double timeout_s = 5;   ///< bound on the connection and on every reply
};

/// What a probe measured.
struct link_probe_result {
  double latency_s = 0;  ///< one way: half the smallest round trip of a small message
  /// (message bytes, bytes per second), one per size measured, smallest first: a train's bytes
  /// over its time less one round trip. A size whose time was all round trip has no entry.
  std::vector<std::pair<double, double>> bandwidth;
  double elapsed_s = 0;  ///< the whole probe, connection included
};

/// The handlers of a probe responder's accepted connections (a listener's accept handler):
/// every control message is echoed, every tensor acknowledged with its size.
accept_handler probe_responder();

/// Probes the link from `t`'s side to the responder listening at `to`.
sailor::result<link_probe_result> probe_link(transport& t, const address& to,
                                             const probe_options& o = {});

/// `configured` with the probe's figures: its latency, the bandwidth of the largest size
/// measured as the sustained figure, and the sizes measured as its curve.
config::zone_link measured_link(const config::zone_link& configured, const link_probe_result& r);

}  // namespace sailor::comm
