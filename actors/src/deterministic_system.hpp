#pragma once
// Test-only: an actor system on CAF's deterministic test scheduler, every Sailor message
// type registered. No threads and no wall clock: messages are delivered when the test runs
// the scheduler (sched.run()), and time moves only when it advances it.

#include <caf/actor_system.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "sailor/actors/runtime.hpp"

namespace sailor::actors::testing {

class deterministic_config : public runtime_config {
public:
  deterministic_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.inline-output", true);
  }
};

/// A test fixture's base: its actor system and the scheduler that drives it.
struct deterministic_system {
  deterministic_config cfg;
  caf::actor_system system{cfg};
  caf::scheduler::test_coordinator& sched =
    dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());
};

}  // namespace sailor::actors::testing
