#pragma once
/// Link shaping: a transport decorator that makes every transfer between two zones take the
/// time the cluster config gives that link, so one machine can stand for a multi-zone cluster
/// (this kernel has no netem).
///
/// Each connection's outgoing messages (controls and tensors, in one queue) pass a
/// serialization clock: a message of b bytes starts when the link is free, occupies it for
/// b / bandwidth(b) seconds, and is handed to the inner transport `latency_s` after it has
/// been serialized. Release times are monotone per connection, so order is preserved. A timer
/// thread owned by the decorator releases messages. The link is `cluster.link(local zone,
/// peer zone)` with the peer's zone learned in the handshake; messages issued before the
/// handshake finished wait for it. The lookup is asked again for each message scheduled, so
/// a lookup over a link_table (link_table.hpp) changes the link at run time. Incoming traffic
/// is not shaped here: the sender shapes.

#include <functional>
#include <memory>

#include "sailor/comm/transport.hpp"
#include "sailor/config/cluster.hpp"

namespace sailor::comm {

/// Which link a connection from `local_zone` to `peer_zone` uses.
using link_lookup =
    std::function<config::zone_link(const std::string& local_zone, const std::string& peer_zone)>;

/// Uses `cluster.link(a, b)` (a copy of the cluster is kept).
link_lookup links_of(config::cluster cluster);

/// Wraps `inner`; the decorator owns it. Local zone: inner->options().local_zone.
std::unique_ptr<transport> make_shaped_transport(std::unique_ptr<transport> inner,
                                                 link_lookup links);

/// When a message of `bytes` entering a link free at `link_free_s` at time `now_s` is
/// released, and when the link is free again: the clock the decorator uses (exposed for
/// tests).
struct link_clock_step {
  double release_s;
  double link_free_s;
};
link_clock_step shape_step(const config::zone_link& link, double now_s, double link_free_s,
                           double bytes);

}  // namespace sailor::comm
