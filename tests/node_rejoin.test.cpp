// Nodes and coordinators start in any order (issue 19, item 2): a sailor-node started before
// its coordinator waits for it (--join-timeout), and one whose coordinator is killed and
// started again on the same train folder and port joins the new one, which resumes from the
// checkpoint the node holds; the job finishes on the undisturbed loss curve.

// Built only with LibTorch (the nodes train; the reference runs the executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "run_command.hpp"
#include "tiny_reference.hpp"

using namespace std::chrono;
using sailor::testing::child;
using sailor::testing::eventually;
using sailor::testing::sailor_bin;
using sailor::testing::single_rank_losses;
using sailor::testing::job_token_file;
using sailor::testing::temp_dir;

namespace {

const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";

// A loopback port free right now (the coordinator binds it a moment later).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

std::vector<std::string> coordinator_argv(const temp_dir& dir, int port, int iterations) {
  const std::string train_dir = dir.path("train");
  return {sailor_bin(), "coordinator", "--planner", "even", "--listen", "127.0.0.1:" + std::to_string(port),
          "--cluster", configs + "/clusters/local-2-zones.yaml", "--model",
          configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml", "--quorum", "1",
          "--settle-s", "60", "--heartbeat-ms", "200", "--heartbeat-timeout-ms", "5000",
          "--transport", "tcp", "--token-file", job_token_file(dir), "--train-dir", train_dir, "--iterations",
          std::to_string(iterations), "--exit-when-done"};
}

std::vector<std::string> node_argv(int port, const temp_dir& dir) {
  return {sailor_bin("sailor-node"), "--join", "127.0.0.1:" + std::to_string(port), "--zone",
          "local-a", "--devices", "cpu:1", "--name", "n1", "--transport", "tcp", "--token-file", job_token_file(dir),
          "--state-dir", dir.path("state"), "--log-dir", dir.path("logs"), "--join-timeout",
          "60"};
}

// Every iteration the run printed from `first` on matches one rank trained undisturbed.
void check_curve(const std::string& out, int iterations, int first) {
  std::smatch batch;
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  REQUIRE(std::regex_search(out, batch, sizes));
  auto reference = single_rank_losses(std::stoi(batch[1]), std::stoi(batch[2]), iterations);
  std::map<int, double> loss;
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) + "  loss ([-0-9.naif]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  for (int k = first; k <= iterations; ++k) {
    REQUIRE(loss.count(k));
    INFO("iteration " << k << ": run " << loss[k] << ", single rank " << reference[k - 1]);
    CHECK(std::abs(loss[k] - reference[k - 1]) <= 1e-4 * std::abs(reference[k - 1]));
  }
}

}  // namespace

TEST_CASE("rejoin: a node started before its coordinator waits for it and trains") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  child node{node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  // The node is up and retrying before there is any coordinator.
  REQUIRE(eventually(30s, [&] { return node.err().find("no coordinator at") != std::string::npos; }));
  CHECK(::kill(node.pid(), 0) == 0);
  child coordinator{coordinator_argv(dir, port, 6), dir.path("c.out"),
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
  auto first = std::make_unique<child>(coordinator_argv(dir, port, iterations),
                                       dir.path("c1.out"), dir.path("c1.err"));
  child node{node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  bool trained = eventually(120s, [&] {
    return first->out().find("iteration 6/" + std::to_string(iterations)) != std::string::npos;
  });
  INFO(first->out());
  INFO(node.err());
  REQUIRE(trained);
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(10s) == 128 + SIGKILL);
  REQUIRE(eventually(30s, [&] { return node.err().find("joining again") != std::string::npos; }));
  child second{coordinator_argv(dir, port, iterations), dir.path("c2.out"),
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
  check_curve(out, iterations, from);
  CHECK(node.wait_exit(30s) == 0);
}

#endif
