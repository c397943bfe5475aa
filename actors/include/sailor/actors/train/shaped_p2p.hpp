#pragma once
/// Link emulation on a communicator whose members sit in different zones: activations and
/// gradients between stages, and the all-reduces of data-parallel groups (and of the whole
/// plan) that span zones, take the time the cluster gives the zone links.
///
/// A decorator over any communicator.
///
/// Point to point: a send to a peer behind a link passes that link's serialization clock
/// (comm::shape_step: it starts when the link is free, occupies it for bytes / bandwidth, and
/// is released `latency_s` after that); the payload itself goes at once, preceded by a small
/// header carrying its release time, and the receiver's request completes only when both have
/// arrived and the release time has passed. Senders never block on the link, so compute and
/// communication overlap exactly as without shaping.
///
/// All-reduce: it runs at once on the inner (loopback) communicator, and returns on every
/// member at the same instant, no earlier than the last member's arrival plus what the links
/// imply for that many bytes (shaped_all_reduce_s below: the better of a ring over all
/// members and a hierarchical all-reduce by zone, counting only the hops between zones, the
/// model simulator::sim_context::allreduce_s uses for a cluster's links). The arrival times
/// travel inside the reduced buffer (fp32/fp64: a few extra elements, no extra round trip).
/// The caller's thread is held as a real link would hold it, and no longer: a member that
/// arrives late is not charged again for the time the others waited. Traffic of collectives
/// and of point-to-point transfers do not contend for a link (the simulator does not model
/// that either). broadcast, all_gather and barrier pass through unshaped (the training loop
/// does not use them on a path that matters for the iteration time).
///
/// Release times are read on std::chrono::steady_clock, which on Linux is the system-wide
/// monotonic clock: every process of this machine agrees on it (emulation is one machine).
///
/// No LibTorch here.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sailor/comm/collective.hpp>
#include <sailor/config/cluster.hpp>
#include <sailor/config/plan.hpp>

namespace sailor::train {

/// Wraps `inner`; `link_to[peer]` (peer: a rank of `inner`) is the link to that peer, or
/// nothing for an unshaped peer. Both ends must agree on which peers are shaped. Point to
/// point only: collectives pass through unshaped.
std::unique_ptr<comm::communicator> make_shaped_p2p(
    std::unique_ptr<comm::communicator> inner,
    std::vector<std::optional<config::zone_link>> link_to);

/// Wraps `inner`, whose member r sits in zone `zone_of[r]` (size: inner->size()): point to
/// point as make_shaped_p2p with the links among `links` between this member's zone and the
/// peer's, and every all_reduce held for shaped_all_reduce_s. Every member must pass the same
/// `zone_of` and `links`.
std::unique_ptr<comm::communicator> make_shaped_group(std::unique_ptr<comm::communicator> inner,
                                                      std::vector<std::string> zone_of,
                                                      std::vector<config::zone_link> links);

/// Seconds the zone links imply for one all-reduce of `bytes` (each member's buffer) among
/// members in zones `zone_of`: with n members in Z zones, the smallest zone holding g of them,
/// L the worst latency and B the least bandwidth of the links a zone-ordered ring crosses,
///   ring:         2(n-1) steps, each L + (bytes/n)/B
///   hierarchical: reduce-scatter inside each zone (not shaped), 2(Z-1) steps across zones,
///                 each L + (bytes/(g Z))/B, all-gather inside each zone (not shaped)
/// and the smaller of the two. 0 when all members share a zone or no link joins their zones.
double shaped_all_reduce_s(const std::vector<std::string>& zone_of,
                           const std::vector<config::zone_link>& links, double bytes);

/// The link between zones `a` and `b` among `links` (either direction); nothing when the zones
/// are equal or empty, or no link joins them.
std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b);

}  // namespace sailor::train
