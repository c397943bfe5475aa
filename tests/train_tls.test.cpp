// TLS end to end: a coordinator and two nodes (two zones) with a job token and TLS files made
// by scripts/make-tls-certs.sh train the tiny model over TCP with TLS, with the loss curve of
// single-rank training; a node that comes without TLS, and one whose certificate another CA
// signed, are refused and the job goes on without them.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
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
using sailor::testing::temp_dir;

namespace {

const std::string source = SAILOR_SOURCE_DIR;
const std::string configs = source + "/configs";

std::vector<std::string> tls_args(const temp_dir& dir, const std::string& ca_dir,
                                  const std::string& name) {
  return {"--tls-cert", dir.path(ca_dir + "/" + name + ".pem"), "--tls-key",
          dir.path(ca_dir + "/" + name + ".key"), "--tls-ca", dir.path("job/ca.pem")};
}

std::vector<std::string> node_argv(const std::string& port, const std::string& name,
                                   const std::string& zone, const std::string& token_file,
                                   const std::string& state, std::vector<std::string> extra) {
  std::vector<std::string> argv{sailor_bin("sailor-node"), "--join", "127.0.0.1:" + port,
                                "--zone", zone, "--devices", "cpu:1", "--name", name,
                                "--transport", "tcp", "--token-file", token_file,
                                "--state-dir", state};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

}  // namespace

TEST_CASE("tls: a job over TCP with TLS trains with the single-rank loss curve, peers without the job's certificates are refused") {
  temp_dir dir;
  const auto make = source + "/scripts/make-tls-certs.sh ";
  REQUIRE(sailor::testing::run_command(make + dir.path("job") + " coordinator n1 n2 > /dev/null", 60)
              .exit_code == 0);
  REQUIRE(sailor::testing::run_command(make + dir.path("other") + " n4 > /dev/null", 60)
              .exit_code == 0);
  auto token_file = dir.write("token", "tls-test-token\n");
  const int iterations = 4;
  std::vector<std::string> argv{sailor_bin(), "coordinator", "--planner", "even", "--listen", "127.0.0.1:0",
                                "--cluster", configs + "/clusters/local-2-zones.yaml",
                                "--model", configs + "/models/tiny.yaml", "--job",
                                configs + "/jobs/tiny.yaml", "--quorum", "2", "--settle-s", "60",
                                "--transport", "tcp", "--token-file", token_file,
                                "--train-dir", dir.path("train"), "--iterations",
                                std::to_string(iterations), "--exit-when-done"};
  for (auto& a : tls_args(dir, "job", "coordinator")) argv.push_back(a);
  child coordinator(argv, dir.path("coordinator.out"), dir.path("coordinator.err"));
  REQUIRE(coordinator.pid() > 0);
  const std::string port = listening_port(coordinator);
  INFO(coordinator.err());
  REQUIRE(!port.empty());
  // Intruders first: without TLS, and with a certificate of another CA. Both give up.
  child plain(node_argv(port, "n3", "local-a", token_file, dir.path("s3"), {"--join-timeout", "3"}),
              dir.path("n3.out"), dir.path("n3.err"));
  child stranger(node_argv(port, "n4", "local-a", token_file, dir.path("s4"),
                           {"--join-timeout", "3", "--tls-cert", dir.path("other/n4.pem"),
                            "--tls-key", dir.path("other/n4.key"), "--tls-ca",
                            dir.path("job/ca.pem")}),
                 dir.path("n4.out"), dir.path("n4.err"));
  CHECK(plain.wait_exit(60s) > 0);
  CHECK(stranger.wait_exit(60s) > 0);
  child n1(node_argv(port, "n1", "local-a", token_file, dir.path("s1"), tls_args(dir, "job", "n1")),
           dir.path("n1.out"), dir.path("n1.err"));
  child n2(node_argv(port, "n2", "local-b", token_file, dir.path("s2"), tls_args(dir, "job", "n2")),
           dir.path("n2.out"), dir.path("n2.err"));
  const int code = coordinator.wait_exit(180s);
  CHECK(n1.wait_exit(30s) >= 0);
  CHECK(n2.wait_exit(30s) >= 0);
  const std::string out = coordinator.out();
  INFO(out);
  INFO(coordinator.err());
  INFO(n1.err());
  REQUIRE(code == 0);
  CHECK(coordinator.err().find("TLS handshake") != std::string::npos);
  std::map<int, double> loss;
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) + "  loss ([-0-9.naif]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  REQUIRE(loss.size() == static_cast<std::size_t>(iterations));
  std::smatch batch;
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  REQUIRE(std::regex_search(out, batch, sizes));
  auto reference = single_rank_losses(std::stoi(batch[1]), std::stoi(batch[2]), iterations);
  for (int k = 1; k <= iterations; ++k) {
    INFO("iteration " << k << ": run " << loss[k] << ", single rank " << reference[k - 1]);
    CHECK(std::abs(loss[k] - reference[k - 1]) <= 1e-4 * std::abs(reference[k - 1]));
  }
}

#endif
