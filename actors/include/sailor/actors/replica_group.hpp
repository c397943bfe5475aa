#pragma once
/// replica_group: the TP peers of one replica of one stage, as the supervisor sees them.
///
///   [gathering] --stage_ready (rank k)--> remember k; all tp ranks ready --> replica_ready
///               to the supervisor --> [complete]
///   [complete]  --stage_ready--> ignored (duplicate)
///
/// One group per (stage, replica) of the current plan; the supervisor replaces them all when
/// the plan changes.

#include <set>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/supervisor_interface.hpp"

namespace sailor::actors {

struct replica_group_state {
  std::int64_t plan_version = 0;
  int stage = 0;
  int replica = 0;
  int tp = 1;
  supervisor_actor supervisor;
  std::set<int> ready_ranks;
  static inline const char* name = "replica_group";
};

/// What a replica group takes: each TP rank's stage actor saying it is ready.
using replica_group_actor = caf::typed_actor<caf::reacts_to<stage_ready>>;

replica_group_actor::behavior_type
replica_group(replica_group_actor::stateful_pointer<replica_group_state> self,
              std::int64_t plan_version, int stage, int replica, int tp,
              supervisor_actor supervisor);

}  // namespace sailor::actors
