#pragma once
/// stage_actor: one device's share of one replica of one pipeline stage, on a node.
///
///   [preparing] --start--> run the stage hook --ok--> stage_ready to the agent --> [ready]
///                                              --error--> stage_failed to the agent, quit
///   [ready] --exit from the agent (new plan, shutdown)--> quit
///
/// The stage hook is where training plugs in (the training runtime's stage executor): it is
/// given the role and sets up the stage's model shard on its device. Without a hook the
/// stage is ready at once (control-plane only).

#include <functional>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

/// Prepares a stage for its role; returns an error when it cannot.
using stage_hook = std::function<status(const stage_role&)>;

struct stage_state {
  std::string node;
  stage_role role;
  caf::actor agent;
  bool ready = false;
  static inline const char* name = "stage_actor";
};

caf::behavior stage_actor(caf::stateful_actor<stage_state>* self, std::string node,
                          stage_role role, caf::actor agent, stage_hook hook);

}  // namespace sailor::actors
