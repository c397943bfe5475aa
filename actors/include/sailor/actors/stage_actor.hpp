#pragma once
/// stage_actor: one device's share of one replica of one pipeline stage, on a node.
///
///   [preparing] --start--> run the stage hook --error--> stage_failed to the agent, quit
///                                              --no work--> stage_ready to the agent --> [ready]
///                                              --work started--> [starting]
///   [starting] --the work says it is ready--> stage_ready to the agent --> [ready]
///   [starting | ready] --exit from the agent (new plan, shutdown)--> quit: the work is
///                                              destroyed, which tells it to stop
///
/// The stage hook is where training plugs in (the training runtime's rank): it is given the
/// role and starts the rank's work (a training thread), which reports ready once its
/// communicators and data-plane channel are connected and its state is restored, so that
/// stage_ready means the rank can train. The stage actor owns that work: when the actor goes,
/// the work is told to stop. Without a hook the stage is ready at once (control-plane only).

#include <functional>
#include <memory>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sailor/actors/node_agent_interface.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

/// What a stage hook started. Destroying it tells the work to stop without waiting for it
/// (the stage actor must not block; whoever started the work joins its thread).
class stage_work {
public:
  virtual ~stage_work() = default;
};

/// Called by the work, once and from any thread, when the stage is ready.
using stage_ready_fn = std::function<void()>;

/// Prepares a stage for its role: an error when it cannot take it; null when it is ready at
/// once; otherwise the work started, which calls `ready` when it is.
using stage_hook =
    std::function<result<std::unique_ptr<stage_work>>(const stage_role&, stage_ready_fn ready)>;

struct stage_state {
  std::string node;
  stage_role role;
  node_agent_actor agent;
  std::unique_ptr<stage_work> work;
  bool ready = false;
  static inline const char* name = "stage_actor";
};

caf::behavior stage_actor(caf::stateful_actor<stage_state>* self, std::string node,
                          stage_role role, node_agent_actor agent, stage_hook hook);

}  // namespace sailor::actors
