#pragma once
/// zone_coordinator: watches the heartbeats of the nodes of one zone.
///
///   [watching] --track_node--> the node is watched from now on
///              --heartbeat--> the node's last heartbeat = now
///              --tick (every heartbeat interval)--> zone_heartbeats to the owner; a node
///                    silent for longer than the timeout --> node_lost to the owner, unwatched
///              --untrack_node--> unwatched
///
/// Nodes address their heartbeats to this actor directly (published as "zone:<name>"), so
/// heartbeat traffic never queues behind the supervisor's work.

#include <map>
#include <string>

#include <caf/actor_clock.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/supervisor_interface.hpp"

namespace sailor::actors {

struct zone_options {
  std::string zone;
  caf::timespan heartbeat_interval = std::chrono::milliseconds{500};
  caf::timespan heartbeat_timeout = std::chrono::milliseconds{2000};
  supervisor_actor owner;  ///< receives zone_heartbeats and node_lost
};

struct zone_state {
  zone_options options;
  std::map<std::string, caf::actor_clock::time_point> last_heard;
  std::uint64_t heartbeats = 0;
  static inline const char* name = "zone_coordinator";
};

/// The name under which a zone's coordinator is published on the bridge.
inline std::string zone_actor_name(const std::string& zone) { return "zone:" + zone; }

/// What a zone coordinator takes: the supervisor starts and stops tracking its nodes, the
/// nodes beat (over the bridge, to the name zone_actor_name), and its own timer ticks.
using zone_coordinator_actor =
  caf::typed_actor<caf::reacts_to<track_node>, caf::reacts_to<untrack_node>,
                   caf::reacts_to<heartbeat>, caf::reacts_to<tick_atom>>;

zone_coordinator_actor::behavior_type
zone_coordinator(zone_coordinator_actor::stateful_pointer<zone_state> self, zone_options options);

}  // namespace sailor::actors
