// Training across hosts that share nothing but the network: the coordinator and three
// sailor-node processes each run in a network namespace of their own with a private /tmp
// (netns_lab.hpp). The ranks meet through the coordinator's rendezvous store, their
// collectives listen on each node's advertised address, and each node keeps its checkpoint
// shards in its own folder. One node is killed mid-training; the supervisor re-plans over the
// other two, and the loss curve must be the one an undisturbed single rank gives.
// A second job loses a whole pipeline stage by SIGKILL: its checkpoint shards live on in the
// copies its writer made on a node of the other stage, and the job resumes from them.
//
// Where namespaces cannot be made (not root), the test exits with code 77, which CTest
// reports as skipped (SKIP_RETURN_CODE), never as passed.

#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "netns_lab.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_netns {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

const std::string configs = configs_dir();

// The environment of every process in the lab: UCX over TCP (no RDMA device here; which
// interface UCX uses is left to the node, which picks its advertised address's), and the job
// token every process of the job proves in the transport handshake.
std::vector<std::string> lab_env() {
  return {"UCX_TLS=tcp,self", "SPDLOG_LEVEL=info",
          "SAILOR_TOKEN=netns-test-token-8d2e"};
}

// The loss printed last for each iteration (iterations after a re-plan may run again).
std::vector<double> printed_curve(const std::string& out, int iterations) {
  std::map<int, double> loss;
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) +
                        "  loss ([0-9.]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  std::vector<double> curve;
  for (auto& [k, v] : loss)
    curve.push_back(v);
  return curve;
}

// The index (0..2 for node-0..node-2) of a node with no role in replica 0 of the first plan,
// read from the plan the coordinator printed ("[CPU@local-a tp1 node-2/0]" per replica, in
// replica order); -1 when there is none.
int node_outside_replica_0(const std::string& out) {
  std::set<std::string> writers, others;
  std::istringstream lines{out.substr(0, out.find("iteration 1/"))};
  const std::regex replica{R"(\[[^@\]]+@[^ ]+ tp[0-9]+ (node-[0-9]+)/[0-9]+\])"};
  for (std::string line; std::getline(lines, line);) {
    if (line.find("  stage ") != 0)
      continue;
    int k = 0;
    for (std::sregex_iterator i{line.begin(), line.end(), replica}, end; i != end; ++i, ++k)
      (k == 0 ? writers : others).insert((*i)[1]);
  }
  for (const auto& name : others)
    if (!writers.count(name))
      return std::stoi(name.substr(5));
  return -1;
}

// How long the supervisor waits for a node's heartbeat, and a rank for a peer.
struct lab_timeouts {
  int heartbeat_ms = 10000;
  int peer_s = 10;
};

// A job in the lab: the coordinator of the tiny job (even planner, two emulated zones) in
// host 0, and nodes node-0.. in hosts 1.. (zones local-a and local-b in turn), each keeping
// its state in its own private /tmp.
struct lab_job {
  temp_dir dir;
  int iterations = 0;
  std::unique_ptr<child> coordinator;
  std::vector<std::unique_ptr<child>> nodes;

  // Starts the coordinator (training `iterations` once `count` nodes joined, with `extra`
  // options) and the nodes.
  void start(const netns_lab& lab, const std::string& transport, int count, int training,
             const std::vector<std::string>& extra = {}, lab_timeouts bounds = {}) {
    iterations = training;
    std::vector<std::string> argv{
      sailor_bin(), "coordinator", "--planner", "even", "--listen", lab.address(0) + ":0",
      "--cluster", configs + "/clusters/local-2-zones.yaml", "--model", configs + "/models/tiny.yaml",
      "--job", configs + "/jobs/tiny.yaml", "--quorum", std::to_string(count), "--settle-s", "30",
      "--heartbeat-ms", "200", "--heartbeat-timeout-ms", std::to_string(bounds.heartbeat_ms),
      "--peer-timeout-s", std::to_string(bounds.peer_s), "--transport", transport, "--train-dir", "/tmp/job", "--iterations",
      std::to_string(iterations), "--exit-when-done", "--emulate-links"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    coordinator = std::make_unique<child>(lab.in_host(0, argv, lab_env()),
                                          dir.path("coordinator.out"), dir.path("coordinator.err"));
    REQUIRE(coordinator->pid() > 0);
    const std::string port = listening_port(*coordinator, lab.address(0));
    INFO(coordinator->out() << coordinator->err());
    REQUIRE(!port.empty());
    const std::string join = lab.address(0) + ":" + port;
    for (int k = 0; k < count; ++k) {
      const std::string name = "node-" + std::to_string(k);
      nodes.push_back(std::make_unique<child>(
        lab.in_host(k + 1,
                    {sailor_bin("sailor-node"), "--join", join, "--zone", k % 2 ? "local-b" : "local-a",
                     "--devices", "cpu:1", "--name", name, "--transport", transport,
                     "--state-dir", "/tmp/state"},
                    lab_env()),
        dir.path(name + ".out"), dir.path(name + ".err")));
      REQUIRE(nodes.back()->pid() > 0);
    }
  }

  // Whether the coordinator printed iteration `k` within `bound`.
  bool reached(int k, std::chrono::seconds bound) const {
    return eventually(bound, [&] {
      return coordinator->out().find("iteration " + std::to_string(k) + "/" +
                                     std::to_string(iterations)) != std::string::npos;
    });
  }
};

void train_across_namespaces(const std::string& transport) {
  netns_lab lab{4};
  skip_without_namespaces(lab);
  lab_job job;
  const int iterations = 60;  // enough to kill a node mid-training on an idle machine
  job.start(lab, transport, 3, iterations);
  child& coordinator = *job.coordinator;
  auto& nodes = job.nodes;
  bool trained = job.reached(3, 120s);
  INFO(coordinator.out());
  INFO(coordinator.err());
  INFO(nodes[0]->err());
  REQUIRE(trained);
  // Each node listened on its own namespace's address.
  for (int k = 0; k < 3; ++k)
    CHECK(nodes[k]->err().find("peers reach it on " + lab.address(k + 1)) != std::string::npos);
  // The victim: a node that writes no checkpoint shard (no role in replica 0), so that the
  // newest checkpoint survives it, held by one node and fetched by the others.
  const int victim = node_outside_replica_0(coordinator.out());
  REQUIRE(victim >= 0);
  nodes[victim]->signal(SIGKILL);
  CHECK(nodes[victim]->wait_exit(5s) == 128 + SIGKILL);
  const int code = coordinator.wait_exit(150s);
  const std::string out = coordinator.out();
  INFO(nodes[1]->err());
  REQUIRE(code == 0);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  CHECK(out.find("plan v2") != std::string::npos);  // re-planned without the victim
  CHECK(out.find("(resumed from the survivors' memory)") != std::string::npos);
  // The survivors restored the state they kept in memory after their last iteration (from
  // their own memory, or fetched into memory over the transport what they lacked): no file.
  std::string restored;
  for (int k = 0; k < 3; ++k)
    if (k != victim)
      restored += nodes[k]->err();
  CHECK(restored.find(" in memory (") != std::string::npos);
  CHECK(restored.find("no file written") != std::string::npos);
  std::smatch batch;
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  REQUIRE(std::regex_search(out, batch, sizes));
  auto reference = single_rank_losses(std::stoi(batch[1]), std::stoi(batch[2]), iterations);
  auto curve = printed_curve(out, iterations);
  REQUIRE(curve.size() == reference.size());
  for (std::size_t k = 0; k < curve.size(); ++k) {
    INFO("iteration " << k + 1 << ": run " << curve[k] << ", single rank " << reference[k]);
    CHECK(std::abs(curve[k] - reference[k]) <= 1e-4 * std::abs(reference[k]));
  }
  // The survivors end too, within the peer timeout (a rank blocked on a gone peer gives up
  // then): shut down by the coordinator (0), or having lost it once it exited (1).
  for (int k = 0; k < 3; ++k) {
    if (k == victim)
      continue;
    const int node_code = nodes[k]->wait_exit(40s);
    CHECK((node_code == 0 || node_code == 1));
  }
}

// The nodes (indices 0..) of the last stage of the first plan the coordinator printed.
std::vector<int> nodes_of_last_stage(const std::string& out) {
  std::istringstream lines{out.substr(0, out.find("iteration 1/"))};
  const std::regex replica{R"(\[[^@\]]+@[^ ]+ tp[0-9]+ (node-[0-9]+)/[0-9]+\])"};
  std::vector<int> last;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("  stage ") != 0)
      continue;
    last.clear();
    for (std::sregex_iterator i{line.begin(), line.end(), replica}, end; i != end; ++i)
      last.push_back(std::stoi((*i)[1].str().substr(5)));
  }
  return last;
}

// The number of the last iteration the coordinator printed before `until` (0: none).
int last_printed_before(const std::string& out, const std::string& until, int iterations) {
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) + "  loss"};
  const auto head = out.substr(0, out.find(until));
  int last = 0;
  for (std::sregex_iterator i{head.begin(), head.end(), line}, end; i != end; ++i)
    last = std::stoi((*i)[1]);
  return last;
}

// 4 nodes, 2 stages of 2 replicas (one per zone), a checkpoint every 2 iterations. Every node
// of stage 1 gets SIGKILL: no survivor holds its layers in memory, and its checkpoint shards
// were written to the private /tmp of its replica 0, gone with it. The copies that writer made
// on a node of stage 0 are what the next plan restores.
void lose_a_stage_across_namespaces(const std::string& transport) {
  netns_lab lab{5};
  skip_without_namespaces(lab);
  lab_job job;
  const int iterations = 40;
  job.start(lab, transport, 4, iterations, {"--checkpoint-every", "2"});
  child& coordinator = *job.coordinator;
  auto& nodes = job.nodes;
  // A copy of the checkpoint after iteration 2 is made once it is written; by iteration 6 two
  // checkpoints were (their copies are on the way, off the training thread).
  bool trained = job.reached(6, 150s);
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(trained);
  const auto stage = nodes_of_last_stage(coordinator.out());
  REQUIRE(stage.size() == 2);
  for (int k : stage)
    nodes[k]->signal(SIGKILL);
  for (int k : stage)
    CHECK(nodes[k]->wait_exit(5s) == 128 + SIGKILL);
  const int code = coordinator.wait_exit(150s);
  const std::string out = coordinator.out();
  std::string survivors;
  for (int k = 0; k < 4; ++k)
    if (std::find(stage.begin(), stage.end(), k) == stage.end())
      survivors += nodes[k]->err();
  INFO(survivors);
  REQUIRE(code == 0);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  // A survivor held a copy of the lost stage's checkpoint shards, made by their writer.
  CHECK(survivors.find("copied by") != std::string::npos);
  // The next plan resumed from that checkpoint (or, when the kill landed right after a
  // checkpoint, from the survivors' memory and it): the iterations after it ran again and are
  // counted; its shards came over the transport.
  const auto last_match = [&](const std::string& pattern) {
    const std::regex re{pattern};
    std::smatch last;
    for (std::sregex_iterator i{out.begin(), out.end(), re}, end; i != end; ++i)
      last = *i;
    return last;
  };
  const auto resumed = last_match("training iterations ([0-9]+)\\.\\." + std::to_string(iterations) +
                                  " \\(resumed from (the checkpoint|the survivors' memory and the "
                                  "checkpoint)\\)");
  REQUIRE(!resumed.empty());
  const int from = std::stoi(resumed[1]) - 1;
  CHECK(from >= 2);
  const auto recovered = last_match("recovered in [0-9.]+ s: state from (checkpoint|mixed) "
                                    "\\(([0-9]+) bytes\\), ([0-9]+) completed iterations run again");
  REQUIRE(!recovered.empty());
  MESSAGE(recovered.str());
  CHECK(std::stoll(recovered[2]) > 0);
  // The iterations completed before the kill was noticed, after the checkpoint: run again.
  const int done_before = last_printed_before(out, "(resumed from", iterations);
  CHECK(done_before >= 6);
  CHECK(std::stoi(recovered[3]) == done_before - from);
  check_printed_curve(out, iterations);
}

// 3 nodes; a node with no role in replica 0 drops off the network without a word (its link
// cut: no reset reaches its peers, which may be waiting for it inside a collective). Each
// surviving rank must still abandon its iteration and the job go on from the survivors'
// memory. Prints how long from the cut to the next plan's first completed iteration.
// With the heartbeat timeout equal to the peer timeout, a rank may give up at its peer
// timeout or be released; with a peer timeout longer than the heartbeat timeout plus the
// supervisor's state wait (5 s), only the release ends the iteration in time: the rank
// aborts its communicators and channel then (abort_on_release in node_training.cpp),
// otherwise it is still blocked when the wait ends and the next plan takes an older
// checkpoint instead of its memory.
void lose_a_silent_node_across_namespaces(const std::string& transport,
                                          lab_timeouts bounds) {
  netns_lab lab{4};
  skip_without_namespaces(lab);
  lab_job job;
  const int iterations = 40;
  job.start(lab, transport, 3, iterations, {}, bounds);
  child& coordinator = *job.coordinator;
  auto& nodes = job.nodes;
  REQUIRE(job.reached(3, 150s));
  const int victim = node_outside_replica_0(coordinator.out());
  REQUIRE(victim >= 0);
  const auto cut_at = steady_clock::now();
  REQUIRE(lab.cut(victim + 1));
  const bool recovered = eventually(120s, [&] {
    return coordinator.out().find(" recovered in ") != std::string::npos;
  });
  const double recovered_s = duration<double>(steady_clock::now() - cut_at).count();
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(recovered);
  const int code = coordinator.wait_exit(150s);
  const std::string out = coordinator.out();
  REQUIRE(code == 0);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  // The survivors hold every layer: nothing is run again.
  std::smatch line;
  REQUIRE(std::regex_search(out, line, std::regex{"recovered in ([0-9.]+) s: state from replicas \\([0-9]+ bytes\\), 0 completed iterations run again"}));
  std::smatch reported;
  const std::string log = coordinator.err();
  std::regex_search(log, reported,
                    std::regex{"the survivors of plan v1 reported their state \\([0-9]+ of [0-9]+ ranks\\) after [0-9.]+ s"});
  MESSAGE("cut -> the next plan's first iteration: " << recovered_s << " s (the supervisor's own "
          "record, from noticing the loss: " << line[1] << " s); " << reported.str());
  check_printed_curve(out, iterations);
  nodes[victim]->signal(SIGKILL);
}

// Issue 39: the coordinator's host loses it (SIGKILL) mid-training; started again there on the
// same train folder and address, it continues the job from its journal: the nodes, each on a
// host of its own, join it again and the job finishes on the single rank's loss curve, counted
// once, its plans numbered on.
void restart_coordinator_across_namespaces(const std::string& transport) {
  netns_lab lab{3};
  skip_without_namespaces(lab);
  temp_dir dir;
  lab.keep_visible(dir.root().string());  // the train folder outlives the coordinator's process
  const int iterations = 40;
  const std::string listen = lab.address(0) + ":7411";  // the host's own port space
  auto coordinator_argv = [&] {
    return lab.in_host(
      0,
      {sailor_bin(), "coordinator", "--planner", "even", "--listen", listen, "--cluster",
       configs + "/clusters/local-2-zones.yaml", "--model", configs + "/models/tiny.yaml", "--job",
       configs + "/jobs/tiny.yaml", "--quorum", "2", "--settle-s", "30", "--heartbeat-ms", "200",
       "--heartbeat-timeout-ms", "10000", "--peer-timeout-s", "10", "--transport", transport,
       "--train-dir", dir.path("train"), "--iterations", std::to_string(iterations),
       "--exit-when-done", "--summary-json", dir.path("summary.json")},
      lab_env());
  };
  auto first = std::make_unique<child>(coordinator_argv(), dir.path("c1.out"), dir.path("c1.err"));
  std::vector<std::unique_ptr<child>> nodes;
  for (int k = 0; k < 2; ++k) {
    const std::string name = "node-" + std::to_string(k);
    nodes.push_back(std::make_unique<child>(
      lab.in_host(k + 1,
                  {sailor_bin("sailor-node"), "--join", listen, "--zone", k % 2 ? "local-b" : "local-a",
                   "--devices", "cpu:1", "--name", name, "--transport", transport, "--state-dir",
                   "/tmp/state"},
                  lab_env()),
      dir.path(name + ".out"), dir.path(name + ".err")));
  }
  const bool trained = eventually(150s, [&] {
    return first->out().find("iteration 5/" + std::to_string(iterations)) != std::string::npos;
  });
  INFO(first->out());
  INFO(first->err());
  REQUIRE(trained);
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(10s) == 128 + SIGKILL);
  child second{coordinator_argv(), dir.path("c2.out"), dir.path("c2.err")};
  const int code = second.wait_exit(150s);
  const std::string out = second.out();
  INFO(out);
  INFO(second.err());
  INFO(nodes[0]->err());
  REQUIRE(code == 0);
  CHECK(out.find("continuing the job of " + dir.path("train") + "/journal") != std::string::npos);
  CHECK(out.find("plan v1:") == std::string::npos);  // its plans number on from the journal
  std::smatch took_over;
  REQUIRE(std::regex_search(out, took_over,
                            std::regex{"took over after the coordinator restarted in ([0-9.]+) s: "
                                       "state from ([a-z]+) \\([0-9]+ bytes\\), ([0-9]+) completed "
                                       "iterations run again"}));
  MESSAGE("over " << transport << " across hosts: " << took_over.str());
  const auto summary = read_json(dir.path("summary.json"));
  CHECK(summary["iterations_completed"] == iterations);
  std::smatch batch;
  REQUIRE(std::regex_search(out, batch, std::regex{R"(micro-batch ([0-9]+), global batch ([0-9]+))"}));
  check_same_curve(summary["loss_curve"].get<std::vector<double>>(),
                   single_rank_losses(std::stoi(batch[1]), std::stoi(batch[2]), iterations));
  // The nodes end too: shut down by the coordinator (0), or having lost it after their ranks
  // completed the last iteration (0). (doctest's check: glog's CHECK is defined in this file.)
  for (auto& node : nodes) {
    const int node_code = node->wait_exit(40s);
    INFO(node->err());
    DOCTEST_CHECK(node_code == 0);
  }
}

}  // namespace

TEST_CASE("netns: a coordinator killed mid-training and started again on its train folder continues the job over UCX, the nodes on hosts of their own") {
  restart_coordinator_across_namespaces("ucx");
}

TEST_CASE("netns: three nodes on separate hosts train over TCP, survive a kill, match one rank") {
  train_across_namespaces("tcp");
}

TEST_CASE("netns: three nodes on separate hosts train over UCX, survive a kill, match one rank") {
  train_across_namespaces("ucx");
}

TEST_CASE("netns: a node that drops off the network without a word: the survivors abandon the iteration in flight within the peer timeout and the job goes on from their memory") {
  lose_a_silent_node_across_namespaces("tcp", {10000, 10});
}

TEST_CASE("netns: a node that drops off the network without a word, noticed long before the peer timeout: the survivors abort the iteration in flight on release and the job goes on from their memory") {
  lose_a_silent_node_across_namespaces("tcp", {3000, 20});
}

TEST_CASE("netns: a whole pipeline stage killed across hosts: resumed from the copies of its checkpoint on the other stage, the iterations after it run again, the same loss curve") {
  lose_a_stage_across_namespaces("tcp");
}

}  // namespace integration_train_netns
#endif

