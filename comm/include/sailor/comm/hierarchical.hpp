#pragma once
/// The hierarchical all-reduce of a group whose members sit in several zones.
///
/// Members are grouped by zone (zones in name order, members of a zone in group order); P is
/// the smallest number of members of any zone (and at most the buffer's element count). An
/// all-reduce of a buffer runs in three phases:
///
///   1. inside each zone, on the zone's own communicator (Gloo on CPU, NCCL on CUDA): when
///      every zone has exactly P members, a ring reduce-scatter over its point to point, so
///      that member j holds shard j reduced over its zone ((P-1)/P of the buffer sent per
///      member); otherwise an all-reduce of the whole buffer. Skipped in a zone of one member;
///   2. across zones, the buffer cut into P shards: the j-th member of every zone (j < P) runs
///      a ring all-reduce of shard j with the j-th members of the other zones, over the
///      channel (comm's transport: the only bytes that cross zone links). With k zones: k-1
///      reduce-scatter steps then k-1 all-gather steps, each moving shard/k bytes to the next
///      zone in name order. The P rings run in parallel, each on its own pair of nodes, so P
///      links carry the exchange where the plan has P nodes per zone;
///   3. inside each zone, the reduced shards go back to every member: one all-gather on the
///      zone's communicator when every zone has exactly P members, else one broadcast per
///      shard from the member that holds it.
///
/// The simulator prices exactly these three phases (simulator::sim_context::allreduce_s).
/// Under link emulation the channel's transport is the link shaper, so the time of phase 2
/// is what the shaped links really take for these bytes, not a formula.
///
/// broadcast, all_gather and barrier are built from the all-reduce (sum); point to point is
/// not offered (it goes over the channel). Aborting the group aborts its zone communicator
/// and the channel it crosses zones on (shared with the rank's other transfers: an abort is
/// for a rank that gives up its work).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sailor/comm/channel.hpp"
#include "sailor/comm/collective.hpp"

namespace sailor::comm {

/// Who is where in a group.
struct zone_layout {
  std::vector<int> members;        ///< global ranks, in group order
  std::vector<std::string> zones;  ///< the zone of each member

  /// The distinct zones, in name order.
  std::vector<std::string> zone_names() const;
  /// Members of `zone`, in group order.
  std::vector<int> members_of(const std::string& zone) const;
  /// The smallest number of members of any zone.
  int min_zone_size() const;
};

/// The global ranks member `global_rank` exchanges shards with in phase 2 (its ring
/// neighbours in the other zones): add them to the peers of its channel.
std::vector<int> hierarchical_peers(const zone_layout& layout, int global_rank);

/// The hierarchical communicator of member `global_rank` of `layout`: `zone_group` is its
/// zone's communicator (null when it is alone in its zone), `cross` the channel whose peers
/// include hierarchical_peers(layout, global_rank) and must outlive the communicator.
/// `tag_space` tells this group's messages on the channel from other users' (0..2^16-1,
/// distinct per group sharing the channel).
std::unique_ptr<communicator> make_hierarchical(std::string name, zone_layout layout,
                                                int global_rank,
                                                std::unique_ptr<communicator> zone_group,
                                                channel& cross, std::uint32_t tag_space);

}  // namespace sailor::comm
