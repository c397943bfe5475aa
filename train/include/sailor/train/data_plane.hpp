#pragma once
/// The data plane of one rank: the transport channel its activations and gradients travel
/// over (comm/channel.hpp), and with them the cross-zone phase of hierarchical all-reduces
/// (comm/hierarchical.hpp). It is told the rank's zone and, under link emulation, sits behind
/// comm's link shaper, which holds the real bytes on each emulated zone link for the link's
/// latency and bandwidth: what crosses a zone boundary takes the time the algorithm's bytes
/// take on that link. No LibTorch here.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sailor/train/executor.hpp>
#include <sailor/comm/channel.hpp>
#include <sailor/comm/link_table.hpp>
#include <sailor/config/cluster.hpp>
#include <sailor/config/plan.hpp>

namespace sailor::train {

/// `base` for rank `role` of `plan`: its transport's zone is the zone of the rank's replica,
/// and when `links` is not empty the transport (base.make_transport, TCP when empty) is
/// wrapped in comm's link shaper with the link among `links` between the two zones of each
/// connection (none: unshaped). `changed`: links set at run time (`sailor-node --link-file`),
/// over `links`, looked up for every message (comm/link_table.hpp); null: none.
comm::transport_channel_options data_plane_options(
  const config::plan& plan, const rank_role& role, const std::vector<config::zone_link>& links,
  comm::transport_channel_options base, std::shared_ptr<const comm::link_table> changed = nullptr);

/// The link between zones `a` and `b` among `links` (either direction); nothing when the zones
/// are equal or empty, or no link joins them.
std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b);

}  // namespace sailor::train
