#include "sailor/actors/zone_coordinator.hpp"

#include <vector>

#include "sailor/config/log.hpp"

namespace sailor::actors {
namespace {

std::int64_t to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

}  // namespace

zone_coordinator_actor::behavior_type
zone_coordinator(zone_coordinator_actor::stateful_pointer<zone_state> self, zone_options options) {
  self->state.options = std::move(options);
  self->delayed_send(self, self->state.options.heartbeat_interval, tick_atom::value);
  return {
    [self](const track_node& x) { self->state.last_heard[x.node] = self->clock().now(); },
    [self](const untrack_node& x) { self->state.last_heard.erase(x.node); },
    [self](const heartbeat& x) {
      auto i = self->state.last_heard.find(x.node);
      if (i == self->state.last_heard.end()) {
        log::get("actors")->debug("[zone {}] heartbeat from untracked node {}",
                                  self->state.options.zone, x.node);
        return;
      }
      i->second = self->clock().now();
      ++self->state.heartbeats;
    },
    [self](tick_atom) {
      auto& st = self->state;
      auto now = self->clock().now();
      zone_heartbeats report{st.options.zone, {}, {}};
      std::vector<std::pair<std::string, std::int64_t>> lost;
      for (auto i = st.last_heard.begin(); i != st.last_heard.end();) {
        auto age = now - i->second;
        if (age > st.options.heartbeat_timeout) {
          lost.emplace_back(i->first, to_ms(age));
          i = st.last_heard.erase(i);
          continue;
        }
        report.nodes.push_back(i->first);
        report.ages_ms.push_back(to_ms(age));
        ++i;
      }
      if (st.options.owner) {
        self->send(st.options.owner, std::move(report));
        for (auto& [node, age_ms] : lost) {
          log::get("actors")->warn("[zone {}] node {} missed heartbeats: silent for {} ms "
                                   "(timeout {} ms)",
                                   st.options.zone, node, age_ms,
                                   to_ms(st.options.heartbeat_timeout));
          self->send(st.options.owner,
                     node_lost{node, "missed heartbeats (silent for " + std::to_string(age_ms) +
                                       " ms, timeout " +
                                       std::to_string(to_ms(st.options.heartbeat_timeout)) +
                                       " ms)"});
        }
      }
      self->delayed_send(self, st.options.heartbeat_interval, tick_atom::value);
    },
  };
}

}  // namespace sailor::actors
