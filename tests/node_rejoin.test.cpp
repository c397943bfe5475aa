// Nodes and coordinators start in any order (issue 19, item 2): a sailor-node started before
// its coordinator waits for it (--join-timeout), and one whose coordinator is killed and
// started again on the same train folder and port joins the new one, which resumes from the
// checkpoint the node holds; the job finishes on the undisturbed loss curve. A node stopped
// (SIGSTOP) past the heartbeat timeout is declared lost; resumed, it joins again as a new
// member and the job finishes with it (issue 36, item 7). A node shut down before its job
// finished says so and exits non-zero.

// Built only with LibTorch (the nodes train; the reference runs the executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include "local_job.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_node_rejoin {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

std::vector<std::string> rejoin_coordinator_argv(const temp_dir& dir, int port, int iterations) {
  return training_coordinator_argv("127.0.0.1:" + std::to_string(port), dir.path("train"), 1, iterations,
                                   {"--settle-s", "60", "--heartbeat-ms", "200", "--heartbeat-timeout-ms", "5000",
                                    "--transport", "tcp", "--token-file", job_token_file(dir)});
}

std::vector<std::string> rejoin_node_argv(int port, const temp_dir& dir) {
  return node_argv("127.0.0.1:" + std::to_string(port), "n1", "local-a",
                   {"--token-file", job_token_file(dir), "--state-dir", dir.path("state"), "--log-dir",
                    dir.path("logs"), "--join-timeout", "60"});
}

}  // namespace

TEST_CASE("rejoin: a node started before its coordinator waits for it and trains") {
  temp_dir dir;
  // Held until the coordinator starts: in a parallel run another test's process could
  // otherwise be given the port, and the node would find it instead of no coordinator.
  held_port held;
  const int port = held.port();
  REQUIRE(port > 0);
  child node{rejoin_node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  // The node is up and retrying before there is any coordinator.
  const bool retrying = eventually(30s, [&] { return node.err().find("no coordinator at") != std::string::npos; });
  INFO(node.err());
  REQUIRE(retrying);
  CHECK(::kill(node.pid(), 0) == 0);
  held.release();
  child coordinator{rejoin_coordinator_argv(dir, port, 6), dir.path("c.out"),
                    dir.path("c.err")};
  const int code = coordinator.wait_exit(120s);
  INFO(coordinator.out());
  INFO(coordinator.err());
  INFO(node.err());
  REQUIRE(code == 0);
  CHECK(coordinator.out().find("training finished: 6 iterations") != std::string::npos);
  CHECK(node.wait_exit(30s) == 0);
}

TEST_CASE("rejoin: after its coordinator is killed and started again, the node joins the new one and the job finishes") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  const int iterations = 40;
  auto first = std::make_unique<child>(rejoin_coordinator_argv(dir, port, iterations),
                                       dir.path("c1.out"), dir.path("c1.err"));
  child node{rejoin_node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  bool trained = eventually(120s, [&] {
    return first->out().find("iteration 6/" + std::to_string(iterations)) != std::string::npos;
  });
  INFO(first->out());
  INFO(node.err());
  REQUIRE(trained);
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(10s) == 128 + SIGKILL);
  REQUIRE(eventually(30s, [&] { return node.err().find("joining again") != std::string::npos; }));
  child second{rejoin_coordinator_argv(dir, port, iterations), dir.path("c2.out"),
               dir.path("c2.err")};
  const int code = second.wait_exit(150s);
  const auto out = second.out();
  INFO(out);
  INFO(second.err());
  REQUIRE(code == 0);
  // The node offered the checkpoints it kept; the new coordinator resumed from them.
  std::smatch resumed;
  REQUIRE(std::regex_search(out, resumed, std::regex{"training iterations ([0-9]+)\\.\\." +
                                                     std::to_string(iterations) +
                                                     " \\(resumed from the checkpoint\\)"}));
  const int from = std::stoi(resumed[1]);
  CHECK(from > 1);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  check_printed_curve(out, iterations, from);
  CHECK(node.wait_exit(30s) == 0);
}

TEST_CASE("rejoin: a node stopped past the heartbeat timeout is declared lost, and resumed it joins again and the job finishes") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  const int iterations = 30;
  auto argv = training_coordinator_argv("127.0.0.1:" + std::to_string(port), dir.path("train"), 1, iterations,
                                        {"--settle-s", "60", "--heartbeat-ms", "200", "--heartbeat-timeout-ms",
                                         "2000", "--transport", "tcp", "--token-file", job_token_file(dir)});
  child coordinator{argv, dir.path("c.out"), dir.path("c.err")};
  child node{rejoin_node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  const bool trained = eventually(120s, [&] {
    return coordinator.out().find("iteration 3/" + std::to_string(iterations)) != std::string::npos;
  });
  INFO(coordinator.out());
  INFO(node.err());
  REQUIRE(trained);
  node.signal(SIGSTOP);
  const bool lost = eventually(30s, [&] { return coordinator.err().find("node n1 lost: missed heartbeats") != std::string::npos; });
  node.signal(SIGCONT);
  INFO(coordinator.err());
  REQUIRE(lost);
  // Resumed, the node hears it was declared lost, and joins again instead of exiting.
  REQUIRE(eventually(30s, [&] { return node.err().find("declared lost by the coordinator") != std::string::npos; }));
  const int code = coordinator.wait_exit(150s);
  const auto out = coordinator.out(), err = coordinator.err();
  INFO(out);
  INFO(err);
  REQUIRE(code == 0);
  const std::regex joined{"node n1 joined"};
  CHECK(std::distance(std::sregex_iterator(err.begin(), err.end(), joined), std::sregex_iterator()) == 2);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") != std::string::npos);
  CHECK(node.wait_exit(30s) == 0);
}

TEST_CASE("rejoin: a node whose coordinator stops before the job finished says so and exits 1") {
  temp_dir dir;
  std::unique_ptr<child> coordinator;
  const auto port = start_listening(coordinator,
                                    coordinator_argv("127.0.0.1:0", {"--quorum", "1", "--transport", "tcp",
                                                                     "--token-file", job_token_file(dir)}),
                                    dir.path("c"));
  child node{rejoin_node_argv(std::stoi(port), dir), dir.path("node.out"), dir.path("node.err")};
  REQUIRE(eventually(60s, [&] { return coordinator->err().find("node n1 joined") != std::string::npos; }));
  coordinator->signal(SIGTERM);
  CHECK(coordinator->wait_exit(30s) == 0);
  INFO(node.err());
  CHECK(node.wait_exit(30s) == 1);
  CHECK(node.err().find("shut down by the coordinator before the job finished") != std::string::npos);
}

}  // namespace integration_node_rejoin
#endif
