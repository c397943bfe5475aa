// A scheduler in its own process (issue 21, item 3): it connects to the coordinator like a
// node, authenticated by the job token; its plan trains; when its process is SIGKILLed the job
// keeps training on its last plan to the end. Started before its coordinator, it waits for it
// as nodes do, and says so.

// Built only with LibTorch (the nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <string>
#include <vector>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_remote_scheduler {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("remote scheduler: its plan trains, and after a SIGKILL the job finishes on that plan") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  const std::string at = "127.0.0.1:" + std::to_string(port);
  const std::string token = job_token_file(dir);
  const int iterations = 24;
  child coordinator{training_coordinator_argv(at, dir.path("train"), 2, iterations,
                                              {"--scheduler", "remote", "--settle-s", "60", "--heartbeat-ms", "200",
                                               "--heartbeat-timeout-ms", "5000", "--token-file", token}),
                    dir.path("c.out"), dir.path("c.err")};
  REQUIRE(eventually(30s, [&] { return has(coordinator.out(), "waiting for a scheduler"); }));

  // Another job's token: refused in the transport's handshake.
  auto wrong = dir.write("wrong.token", "not-this-job\n");
  child intruder{{sailor_bin("remote_scheduler"), "--join", at, "--token-file", wrong},
                 dir.path("i.out"), dir.path("i.err")};
  CHECK(intruder.wait_exit(30s) == 3);  // refused: not retried
  // The coordinator says why it closed: the peer failed authentication.
  CHECK(eventually(10s, [&] { return has(coordinator.err(), "failed authentication"); }));

  child scheduler{{sailor_bin("remote_scheduler"), "--join", at, "--token-file", token},
                  dir.path("s.out"), dir.path("s.err")};
  REQUIRE(eventually(30s, [&] { return has(scheduler.out(), "scheduler: attached"); }));
  std::vector<std::unique_ptr<child>> nodes;
  for (std::string name : {"n1", "n2"})
    nodes.push_back(std::make_unique<child>(
      node_argv(at, name, "local-a",
                {"--token-file", token, "--state-dir", dir.path("state-" + name), "--log-dir", dir.path("logs-" + name)}),
      dir.path(name + ".out"), dir.path(name + ".err")));
  // The scheduler's plan runs: it hears its first iteration.
  bool training = eventually(60s, [&] { return has(scheduler.out(), "scheduler: telemetry v1"); });
  INFO(scheduler.out());
  INFO(scheduler.err());
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(training);
  scheduler.signal(SIGKILL);
  REQUIRE(scheduler.wait_exit(10s) == 128 + SIGKILL);
  const int code = coordinator.wait_exit(90s);
  const auto out = coordinator.out(), err = coordinator.err(), said = scheduler.out();
  INFO(out);
  INFO(err);
  INFO(said);
  INFO(intruder.err());
  REQUIRE(code == 0);
  CHECK(has(said, "plan v1 applied by the scheduler"));
  CHECK(has(said, "refused: evict: node 'no-such-node' has not joined"));
  CHECK(has(err, "scheduler 'remote scheduler' is gone"));
  CHECK(has(out, "training finished: " + std::to_string(iterations) + " iterations"));
  CHECK_FALSE(has(out, "plan v2"));  // the job ran on the plan the scheduler made
  for (auto& n : nodes)
    CHECK(n->wait_exit(30s) == 0);
}

TEST_CASE("remote scheduler: started before its coordinator, it waits for it, says so, and attaches") {
  temp_dir dir;
  held_port held;  // refused connections until the coordinator binds it
  const int port = held.port();
  REQUIRE(port > 0);
  const std::string at = "127.0.0.1:" + std::to_string(port);
  const std::string token = job_token_file(dir);
  child scheduler{{sailor_bin("remote_scheduler"), "--join", at, "--token-file", token},
                  dir.path("s.out"), dir.path("s.err")};
  const bool waiting = eventually(30s, [&] { return has(scheduler.out(), "no coordinator at " + at + " yet"); });
  INFO(scheduler.out());
  INFO(scheduler.err());
  REQUIRE(waiting);
  CHECK(has(scheduler.out(), "retrying for up to 60 s"));
  held.release();
  child coordinator{coordinator_argv(at, {"--scheduler", "remote", "--transport", "tcp", "--token-file", token}),
                    dir.path("c.out"), dir.path("c.err")};
  CHECK(eventually(60s, [&] { return has(scheduler.out(), "scheduler: attached"); }));
  coordinator.signal(SIGTERM);
  CHECK(coordinator.wait_exit(30s) == 0);
  CHECK(scheduler.wait_exit(30s) == 0);
}

}  // namespace integration_remote_scheduler
#endif
