#pragma once
/// Link emulation on the point-to-point path of a communicator: activations and gradients
/// between stages in different zones take the time the cluster gives that zone link.
///
/// A decorator over any communicator. A send to a peer behind a link passes that link's
/// serialization clock (comm::shape_step: it starts when the link is free, occupies it for
/// bytes / bandwidth, and is released `latency_s` after that); the payload itself goes at
/// once, preceded by a small header carrying its release time, and the receiver's request
/// completes only when both have arrived and the release time has passed. Senders never
/// block on the link, so compute and communication overlap exactly as without shaping.
/// Release times are read on std::chrono::steady_clock, which on Linux is the system-wide
/// monotonic clock: every process of this machine agrees on it (emulation is one machine).
/// Collectives pass through unshaped.
///
/// No LibTorch here.

#include <memory>
#include <optional>
#include <vector>

#include <sailor/comm/collective.hpp>
#include <sailor/config/cluster.hpp>
#include <sailor/config/plan.hpp>

namespace sailor::train {

/// Wraps `inner`; `link_to[peer]` (peer: a rank of `inner`) is the link to that peer, or
/// nothing for an unshaped peer. Both ends must agree on which peers are shaped.
std::unique_ptr<comm::communicator> make_shaped_p2p(
    std::unique_ptr<comm::communicator> inner,
    std::vector<std::optional<config::zone_link>> link_to);

/// The link between zones `a` and `b` among `links` (either direction); nothing when the zones
/// are equal or empty, or no link joins them.
std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b);

}  // namespace sailor::train
