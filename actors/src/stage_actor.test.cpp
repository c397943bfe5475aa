// The stage actor under CAF's deterministic scheduler: it reports ready only when the work its
// hook started says so (the rank's communicators are up), and it owns that work.
#include "sailor/actors/stage_actor.hpp"

#include <doctest/doctest.h>

#include <caf/exit_reason.hpp>

#include "deterministic_system.hpp"

using namespace sailor::actors;

namespace {

struct agent_log {
  std::vector<stage_role> ready;
  std::vector<std::string> failed;
};

// The node agent as a stage actor sees it.
caf::behavior fake_agent(caf::event_based_actor*, std::shared_ptr<agent_log> log) {
  return {
    [log](const stage_ready& x) { log->ready.push_back(x.role); },
    [log](const stage_failed& x) { log->failed.push_back(x.reason); },
  };
}

// Work that records when it is told to stop (destroyed).
struct recorded_work final : stage_work {
  std::shared_ptr<bool> stopped;
  explicit recorded_work(std::shared_ptr<bool> s) : stopped(std::move(s)) {}
  ~recorded_work() override { *stopped = true; }
};

struct fixture : testing::deterministic_system {
  std::shared_ptr<agent_log> log = std::make_shared<agent_log>();
  caf::actor fake = system.spawn(fake_agent, log);
  node_agent_actor agent = caf::actor_cast<node_agent_actor>(fake);  // it gets only what stages send
  stage_role role = [] {
    stage_role r;
    r.plan_version = 3;
    r.stage = 1;
    r.replica = 2;
    return r;
  }();

  ~fixture() {
    caf::anon_send_exit(fake, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "stage actor: ready only once its work says so, and the work stops when the actor goes") {
  stage_ready_fn ready;
  auto stopped = std::make_shared<bool>(false);
  stage_hook hook = [&](const stage_role&, stage_ready_fn r) -> sailor::result<std::unique_ptr<stage_work>> {
    ready = std::move(r);
    return std::unique_ptr<stage_work>{std::make_unique<recorded_work>(stopped)};
  };
  auto stage = system.spawn(stage_actor, std::string{"n0"}, role, agent, hook);
  sched.run();
  REQUIRE(ready);
  CHECK(log->ready.empty());  // the work started, its communicators are not up yet
  ready();                    // as the training thread does, from its own thread
  sched.run();
  REQUIRE(log->ready.size() == 1);
  CHECK(log->ready[0].stage == 1);
  CHECK(log->ready[0].replica == 2);
  ready();  // a second call changes nothing
  sched.run();
  CHECK(log->ready.size() == 1);
  CHECK_FALSE(*stopped);
  caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);  // a new plan
  sched.run();
  CHECK(*stopped);
  ready();  // the work notices late: nothing is sent to a gone actor
  sched.run();
  CHECK(log->ready.size() == 1);
}

TEST_CASE_FIXTURE(fixture, "stage actor: without work it is ready at once, and a refused role is a failure") {
  stage_hook none = [](const stage_role&, stage_ready_fn) -> sailor::result<std::unique_ptr<stage_work>> {
    return std::unique_ptr<stage_work>{};
  };
  system.spawn(stage_actor, std::string{"n0"}, role, agent, none);
  sched.run();
  CHECK(log->ready.size() == 1);
  stage_hook refuse = [](const stage_role&,
                         stage_ready_fn) -> sailor::result<std::unique_ptr<stage_work>> {
    return sailor::error::invalid_input("role", "stage 1 is not in the plan");
  };
  system.spawn(stage_actor, std::string{"n0"}, role, agent, refuse);
  sched.run();
  REQUIRE(log->failed.size() == 1);
  CHECK(log->failed[0].find("not in the plan") != std::string::npos);
}
