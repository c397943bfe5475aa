// Faults a training job must get through without stalling, with real processes: a node whose
// advertised address its peers cannot reach (network namespaces), a node whose state folder
// is read-only (a mount namespace), and a checkpoint shard found corrupt only when a plan
// restores it. Each asserts what a user would check: the job finishes, on the undisturbed
// loss curve, and the coordinator says what happened and to which node.
//
// Namespaces need root: without them a test exits with 77, which CTest reports as skipped.

// Built only with LibTorch (the nodes train; the reference runs the executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "local_job.hpp"
#include "netns_lab.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_faults {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

namespace fs = std::filesystem;

// The port a coordinator printed it listens on (`host` as given).
std::string port_of(const child& coordinator, const std::string& host) {
  const std::string port = listening_port(coordinator, host);
  INFO(coordinator.err());
  REQUIRE(!port.empty());
  return port;
}

std::vector<std::string> faults_coordinator_argv(const std::string& listen, const std::string& train_dir,
                                                 int quorum, int iterations, std::vector<std::string> extra) {
  extra.insert(extra.end(), {"--heartbeat-ms", "200", "--heartbeat-timeout-ms", "5000", "--peer-timeout-s", "20"});
  if (std::find(extra.begin(), extra.end(), "--settle-s") == extra.end())
    extra.insert(extra.end(), {"--settle-s", "60"});
  return training_coordinator_argv(listen, train_dir, quorum, iterations, extra);
}

// The coordinator of a test job in `dir` on loopback over TCP, training in dir/train; `extra`
// options follow.
std::vector<std::string> job_coordinator_argv(const temp_dir& dir, int quorum, int iterations,
                                              std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {"--transport", "tcp", "--token-file", job_token_file(dir)});
  return faults_coordinator_argv("127.0.0.1:0", dir.path("train"), quorum, iterations, extra);
}

// A node of a test job in `dir` (its token file, logs in dir/logs) joining `join` from
// local-a, its state in `state_dir`.
std::vector<std::string> job_node_argv(const temp_dir& dir, const std::string& join, const std::string& name,
                                       const std::string& state_dir) {
  return node_argv(join, name, "local-a",
                   {"--token-file", job_token_file(dir), "--state-dir", state_dir, "--log-dir", dir.path("logs")});
}

}  // namespace

TEST_CASE("faults: a node its peers cannot reach at its advertised address is named and the job re-planned without it") {
  netns_lab lab{4};
  skip_without_namespaces(lab);
  // node-2 advertises an address of its own host that no other host has a route to.
  const std::string first = lab.address(0);  // 10.231.<lab>.1
  const std::string hidden = "10.232." + first.substr(7, first.rfind('.') - 7) + ".1";
  REQUIRE(run_command("ip -n " + lab.ns(3) + " addr add " + hidden + "/32 dev lo", 20).exit_code == 0);
  temp_dir dir;
  const int iterations = 12;
  const std::vector<std::string> env{"UCX_NET_DEVICES=sl0", "UCX_TLS=tcp,self",
                                     "SPDLOG_LEVEL=info", "SAILOR_TOKEN=unreachable-test-4f1a"};
  child coordinator{lab.in_host(0, faults_coordinator_argv(lab.address(0) + ":0", "/tmp/job", 3,
                                                    iterations, {"--transport", "tcp"}),
                                env),
                    dir.path("coordinator.out"), dir.path("coordinator.err")};
  REQUIRE(coordinator.pid() > 0);
  const std::string join = lab.address(0) + ":" + port_of(coordinator, lab.address(0));
  std::vector<std::unique_ptr<child>> nodes;
  for (int k = 0; k < 3; ++k) {
    const std::string name = "node-" + std::to_string(k);
    auto argv = node_argv(join, name, "local-a", {"--state-dir", "/tmp/state"});
    if (k == 2) {
      argv.push_back("--advertise");
      argv.push_back(hidden);
    }
    nodes.push_back(std::make_unique<child>(lab.in_host(k + 1, argv, env),
                                            dir.path(name + ".out"), dir.path(name + ".err")));
    REQUIRE(nodes.back()->pid() > 0);
  }
  const int code = coordinator.wait_exit(200s);
  const auto out = coordinator.out();
  const auto log = coordinator.err();
  INFO(out);
  INFO(log);
  INFO(nodes[0]->err());
  REQUIRE(code == 0);
  // The rank's error names both nodes and the address; node-2 is dropped, not waited for.
  CHECK(std::regex_search(log, std::regex{"node node-[01] cannot reach node node-2 at " +
                                          std::regex_replace(hidden, std::regex{"\\."}, "\\.") +
                                          ":[0-9]+ \\(the address it advertised\\)"}));
  CHECK(log.find("node node-2 lost: unreachable by its peers") != std::string::npos);
  CHECK(log.find("training failed") == std::string::npos);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  // Told to leave by the coordinator before the job finished: it says so and exits 1.
  CHECK(nodes[2]->wait_exit(30s) == 1);
  CHECK(nodes[2]->err().find("shut down by the coordinator") != std::string::npos);
  check_printed_curve(out, iterations);
}

TEST_CASE("faults: checkpoint writes failing on a read-only state folder are told, and training goes on") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: a read-only mount needs root");
    std::exit(77);
  }
  temp_dir dir;
  fs::create_directories(dir.path("ro-state"));
  const int iterations = 10;
  child coordinator{job_coordinator_argv(dir, 2, iterations), dir.path("coordinator.out"), dir.path("coordinator.err")};
  const std::string join = "127.0.0.1:" + port_of(coordinator, "127.0.0.1");
  child good{job_node_argv(dir, join, "n1", dir.path("state")), dir.path("n1.out"), dir.path("n1.err")};
  // n2's state folder is a read-only mount, in a mount namespace of its own.
  std::string script = "mount -t tmpfs -o ro sailor-ro '" + dir.path("ro-state") + "' && exec";
  for (auto& a : job_node_argv(dir, join, "n2", dir.path("ro-state")))
    script += " '" + a + "'";
  child readonly{{"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script},
                 dir.path("n2.out"), dir.path("n2.err")};
  const int code = coordinator.wait_exit(150s);
  const auto out = coordinator.out();
  const auto log = coordinator.err();
  INFO(out);
  INFO(log);
  INFO(readonly.err());
  REQUIRE(code == 0);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  CHECK(std::regex_search(log, std::regex{"checkpoint writes fail on node n2: [^\\n]*Read-only "
                                          "file system[^\\n]*training goes on"}));
  check_printed_curve(out, iterations);
}

TEST_CASE("faults: a checkpoint shard found corrupt when a plan restores it is skipped for the previous checkpoint") {
  temp_dir dir;
  // First run: one node trains 4 iterations, a checkpoint after each.
  {
    child coordinator{job_coordinator_argv(dir, 1, 4), dir.path("c1.out"), dir.path("c1.err")};
    const std::string join = "127.0.0.1:" + port_of(coordinator, "127.0.0.1");
    child node{job_node_argv(dir, join, "n1", dir.path("s1")), dir.path("n1a.out"), dir.path("n1a.err")};
    INFO(coordinator.err());
    REQUIRE(coordinator.wait_exit(120s) == 0);
    CHECK(node.wait_exit(30s) >= 0);
  }
  // Second run, 6 iterations: n1 offers its shards (they verify when it joins); then the
  // newest is corrupted, and n2's join makes the plan that restores it.
  child coordinator{job_coordinator_argv(dir, 2, 6), dir.path("c2.out"), dir.path("c2.err")};
  const std::string join = "127.0.0.1:" + port_of(coordinator, "127.0.0.1");
  child n1{job_node_argv(dir, join, "n1", dir.path("s1")), dir.path("n1b.out"), dir.path("n1b.err")};
  REQUIRE(eventually(60s, [&] { return coordinator.err().find("node n1 joined") != std::string::npos; }));
  fs::path shard;
  for (auto& e : fs::recursive_directory_iterator(fs::path(dir.path("s1")) / "checkpoints"))
    if (e.path().extension() == ".ckpt" && e.path().parent_path().filename() == "iter-00000004")
      shard = e.path();
  REQUIRE(!shard.empty());
  {
    const auto size = fs::file_size(shard);
    std::fstream io(shard, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(static_cast<std::streamoff>(size - 6000));
    std::mt19937 rng(7);
    for (int i = 0; i < 4096; ++i) io.put(static_cast<char>(rng()));
  }
  child n2{job_node_argv(dir, join, "n2", dir.path("s2")), dir.path("n2.out"), dir.path("n2.err")};
  const int code = coordinator.wait_exit(150s);
  const auto out = coordinator.out();
  const auto log = coordinator.err();
  INFO(out);
  INFO(log);
  REQUIRE(code == 0);
  CHECK(out.find("training iterations 5..6 (resumed from the checkpoint)") != std::string::npos);
  CHECK(std::regex_search(log, std::regex{"n[12] rank 0 could not restore the checkpoint after iteration 4 "}));
  CHECK(out.find("training iterations 4..6 (resumed from the checkpoint)") != std::string::npos);
  CHECK(out.find("training finished: 6 iterations") != std::string::npos);
  check_printed_curve(out, 6, 4);
}

TEST_CASE("faults: across re-plans each node keeps a bounded number of plan folders") {
  temp_dir dir;
  child coordinator{job_coordinator_argv(dir, 3, 100000, {"--settle-s", "5"}), dir.path("c.out"), dir.path("c.err")};
  const std::string join = "127.0.0.1:" + port_of(coordinator, "127.0.0.1");
  auto start = [&](int k) {
    const std::string name = "n" + std::to_string(k);
    return std::make_unique<child>(job_node_argv(dir, join, name, dir.path("state-" + name)),
                                   dir.path(name + ".out"), dir.path(name + ".err"));
  };
  std::vector<std::unique_ptr<child>> nodes;
  for (int k = 0; k < 3; ++k)
    nodes.push_back(start(k));
  // Plan v`version` printed and one of its iterations after it.
  auto trained_under = [&](int version) {
    const auto out = coordinator.out();
    const auto at = out.find("plan v" + std::to_string(version) + ": ");
    return at != std::string::npos && out.find("\niteration ", at) != std::string::npos;
  };
  int version = 1;
  REQUIRE(eventually(120s, [&] { return trained_under(version); }));
  for (int cycle = 0; cycle < 3; ++cycle) {
    const int k = cycle % 3;
    nodes[k]->signal(SIGKILL);
    REQUIRE(nodes[k]->wait_exit(10s) == 128 + SIGKILL);
    ++version;
    bool replanned = eventually(120s, [&] { return trained_under(version); });
    INFO(coordinator.out());
    INFO(coordinator.err());
    REQUIRE(replanned);
    nodes[k] = start(k);
    ++version;
    REQUIRE(eventually(120s, [&] { return trained_under(version); }));
  }
  // Seven plans, each writing a folder of its own; a node keeps the ones a plan may still
  // restore from (its own, the one restored, the next older complete one).
  for (int k = 0; k < 3; ++k) {
    int folders = 0;
    for (auto& job : fs::directory_iterator(fs::path(dir.path("state-n" + std::to_string(k))) / "checkpoints"))
      for (auto& plan : fs::directory_iterator(job.path()))
        folders += plan.is_directory() && plan.path().filename().string()[0] == 'v';
    INFO("node n" << k << " holds " << folders << " plan folders after " << version << " plans");
    CHECK(folders <= 3);
  }
  CHECK(coordinator.err().find("training failed") == std::string::npos);
}

}  // namespace integration_train_faults
#endif
