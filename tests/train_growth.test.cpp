// A running job grows the way it recovers (issue 12, item 4): a node that joins gets its state
// from the running ranks' memory over the transport, and no completed iteration is run again.
// And a holder SIGKILLed while a restore is fetching from it: the job re-plans again and still
// finishes on the undisturbed loss curve. Real processes (`sailor coordinator --train-dir` and
// `sailor-node`s over TCP on loopback), every wait bounded.

// Built only with LibTorch (the nodes train; the reference runs the executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_job.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_growth {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

// A coordinator that trains `iterations` once `quorum` nodes joined and writes its summary;
// `extra` options follow; the tiny model unless `model_file` names another.
std::string start_growth_coordinator(std::unique_ptr<child>& coordinator, const temp_dir& dir,
                                     int quorum, int iterations,
                                     const std::vector<std::string>& extra = {},
                                     const std::string& model_file = "") {
  std::vector<std::string> options{"--quorum", std::to_string(quorum), "--train-dir", dir.path("train"),
                                   "--iterations", std::to_string(iterations), "--exit-when-done",
                                   "--settle-s", "60", "--heartbeat-ms", "200",
                                   "--heartbeat-timeout-ms", "5000", "--transport", "tcp",
                                   "--token-file", job_token_file(dir), "--summary-json",
                                   dir.path("summary.json")};
  options.insert(options.end(), extra.begin(), extra.end());
  auto argv = coordinator_argv("127.0.0.1:0", options, model_file);
  return start_listening(coordinator, argv, dir.path("coordinator"));
}

// The checkpoint shard files under a node's state folder.
int shard_files(const std::string& state_dir) {
  int n = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator i{state_dir, ec}, end; !ec && i != end; i.increment(ec))
    n += i->path().extension() == ".ckpt";
  return n;
}

// A node with a state folder of its own (nodes share no file system); `env` (VAR=value) is
// added to its environment.
std::unique_ptr<child> start_node(const temp_dir& dir, const std::string& port,
                                  const std::string& name, const std::string& zone,
                                  const std::vector<std::string>& env = {}) {
  auto argv = node_argv("127.0.0.1:" + port, name, zone,
                        {"--token-file", job_token_file(dir), "--state-dir", dir.path("state-" + name)});
  if (!env.empty()) {
    std::vector<std::string> with{"/usr/bin/env"};
    with.insert(with.end(), env.begin(), env.end());
    argv.insert(argv.begin(), with.begin(), with.end());
  }
  auto node = std::make_unique<child>(argv, dir.path(name + ".out"), dir.path(name + ".err"));
  REQUIRE(node->pid() > 0);
  return node;
}

// Whether the coordinator printed iteration `k` of `iterations` completed.
bool printed_iteration(const child& coordinator, int k, int iterations) {
  return coordinator.out().find("iteration " + std::to_string(k) + "/" + std::to_string(iterations) +
                                "  loss") != std::string::npos;
}

// Waits (up to `limit`) until the coordinator printed iteration 3: the job trains before a node
// joins or is killed; the test stops when it does not.
void require_training(const child& coordinator, int iterations, milliseconds limit) {
  const bool trained = eventually(limit, [&] { return printed_iteration(coordinator, 3, iterations); });
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(trained);
}

// The coordinator's output once it exited (0 required, within `limit`) and its summary.
struct finished_job {
  std::string out;
  nlohmann::json summary;
};
finished_job wait_finished(child& coordinator, const temp_dir& dir, int iterations,
                           milliseconds limit) {
  const int code = coordinator.wait_exit(limit);
  finished_job job{coordinator.out(), {}};
  INFO(job.out);
  INFO(coordinator.err());
  REQUIRE(code == 0);
  REQUIRE(job.out.find("training finished: " + std::to_string(iterations) + " iterations") !=
          std::string::npos);
  job.summary = read_json(dir.path("summary.json"));
  return job;
}

// What a user checks of a job that changed plans while it ran: every iteration printed once
// (none run again), nothing lost, every plan on the same batch sizes, and the whole loss curve
// the undisturbed single rank's (of the tiny model unless `model_file` names another).
void check_nothing_run_again(const finished_job& job, int iterations, const std::string& model_file = "") {
  INFO(job.out);
  for (int k = 1; k <= iterations; ++k) {
    const std::regex line{"\niteration " + std::to_string(k) + "/" + std::to_string(iterations) + "  loss"};
    const auto printed = std::distance(std::sregex_iterator(job.out.begin(), job.out.end(), line),
                                       std::sregex_iterator());
    INFO("iteration " << k);
    CHECK(printed == 1);
  }
  const auto& j = job.summary;
  CHECK(j["iterations_completed"].get<int>() == iterations);
  CHECK(j["lost_iterations"].get<int>() == 0);
  CHECK(j["state_source"].get<std::string>() == "replicas");
  const auto batch = printed_batch(job.out);
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  for (std::sregex_iterator i{job.out.begin(), job.out.end(), sizes}, end; i != end; ++i)
    CHECK(std::pair{std::stoi((*i)[1]), std::stoi((*i)[2])} == batch);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(),
                   single_rank_losses(batch.first, batch.second, iterations, model_file));
}

// The bytes a node's rank says came over the transport when it resumed from memory (-1: it
// did not say).
long long fetched_over_transport(const std::string& log) {
  static const std::regex resumed{R"(resumed from the state after iteration [0-9]+ in memory \([0-9]+ shards, [0-9]+ bytes, ([0-9]+) of them over the transport)"};
  std::smatch m;
  return std::regex_search(log, m, resumed) ? std::stoll(m[1]) : -1;
}

// How many holders at once a node's rank fetched a shard from, the most over its log (0: it
// fetched none in parts).
int most_holders_at_once(const std::string& log) {
  static const std::regex parts{R"(\[shards\] fetched \S+ \([0-9]+ bytes\) in [0-9]+ parts from ([0-9]+) holders at once)"};
  int most = 0;
  for (std::sregex_iterator i{log.begin(), log.end(), parts}, end; i != end; ++i)
    most = std::max(most, std::stoi((*i)[1]));
  return most;
}

}  // namespace

TEST_CASE("growth: a node joins a job running on one node, no checkpoint on disk: the plan over both takes the state from the running rank's memory, no iteration lost, the same loss curve") {
  temp_dir dir;
  const int iterations = 100;
  std::unique_ptr<child> coordinator;
  // No checkpoint on disk at all (--checkpoint-every 0): the state can only come from memory.
  const auto port = start_growth_coordinator(coordinator, dir, 1, iterations, {"--checkpoint-every", "0"});
  auto first = start_node(dir, port, "n0", "local-a");
  require_training(*coordinator, iterations, 90s);
  // n1 in the same zone: the next plan is two stages (other boundaries than the one stage
  // n0's rank holds), n1's stage re-sliced from n0's state.
  auto second = start_node(dir, port, "n1", "local-a");
  const auto job = wait_finished(*coordinator, dir, iterations, 150s);
  INFO(second->err());
  INFO(first->err());
  check_nothing_run_again(job, iterations);
  const auto& j = job.summary;
  CHECK(j["replans"].get<int>() == 1);
  CHECK(job.out.find("plan v2: 2 stages") != std::string::npos);
  const auto resumed = j["resumed_at"].get<std::vector<int>>();
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0] >= 3);
  REQUIRE(j["recovery"].size() == 1);
  CHECK(j["recovery"][0]["cause"].get<std::string>() == "replan");
  CHECK(j["recovery"][0]["start_iteration"].get<int>() == resumed[0]);
  // The ranks' state of the whole model (parameters and AdamW's two moments, fp32) was read
  // from memory, and n1's part of it came over the transport, no file written.
  CHECK(j["bytes_restored"].get<std::int64_t>() >= 3 * 4 * 218496);
  CHECK(fetched_over_transport(second->err()) > 0);
  CHECK(second->err().find("no file written") != std::string::npos);
  CHECK(shard_files(dir.path("state-n0")) == 0);
  CHECK(shard_files(dir.path("state-n1")) == 0);
  CHECK(first->err().find("plan v1 ended after iteration " + std::to_string(resumed[0]) +
                          ": keeps its state in memory") != std::string::npos);
}

TEST_CASE("growth: a holder SIGKILLed while the joining node fetches the state from it: the job re-plans again and finishes, no iteration lost, the same loss curve") {
  temp_dir dir;
  const int iterations = 100;
  const auto marker = dir.path("holding");
  std::unique_ptr<child> coordinator;
  const auto port = start_growth_coordinator(coordinator, dir, 2, iterations);
  // n0 and n1, one per zone: one stage of two replicas, each holding the whole model. The
  // first of them asked for its in-memory state by another node leaves the request
  // unanswered and names itself in `marker` (SAILOR_TEST_HOLD_STATE_SERVE: test-only).
  const std::vector<std::string> hold{"SAILOR_TEST_HOLD_STATE_SERVE=" + marker};
  std::map<std::string, std::unique_ptr<child>> nodes;
  nodes["n0"] = start_node(dir, port, "n0", "local-a", hold);
  nodes["n1"] = start_node(dir, port, "n1", "local-b", hold);
  require_training(*coordinator, iterations, 90s);
  // n2 joins: the plan over three nodes is one stage of three replicas, and n2 fetches the
  // state from n0 and n1. The holder it asks first holds the request: it is killed there.
  nodes["n2"] = start_node(dir, port, "n2", "local-a");
  std::string victim;
  const bool holding = eventually(90s, [&] {
    std::ifstream in(marker);
    return in && std::getline(in, victim) && nodes.count(victim) > 0;
  });
  INFO(nodes["n2"]->err());
  REQUIRE(holding);
  REQUIRE(victim != "n2");
  nodes[victim]->signal(SIGKILL);
  REQUIRE(nodes[victim]->wait_exit(10s) == 128 + SIGKILL);
  const auto job = wait_finished(*coordinator, dir, iterations, 200s);
  INFO(nodes["n2"]->err());
  check_nothing_run_again(job, iterations);
  const auto& j = job.summary;
  // The plan of the growth (v2), and at least one more after the holder was lost.
  CHECK(j["replans"].get<int>() >= 2);
  CHECK(job.out.find("plan v3") != std::string::npos);
  CHECK(coordinator->err().find("node " + victim + " lost") != std::string::npos);
  // The fetch from the victim failed and went to the other holder, or the next plan fetched
  // from the one left: n2 resumed from memory with state that came over the transport.
  CHECK(fetched_over_transport(nodes["n2"]->err()) > 0);
  CHECK(j["bytes_restored"].get<std::int64_t>() >= 3 * 4 * 218496);
}

TEST_CASE("growth: a node joins two replicas of a model whose state passes the split size: it fetches the state from both holders at once, no iteration lost, the same loss curve") {
  temp_dir dir;
  const int iterations = 40;
  // The tiny model widened to hidden 160: about 1.3 M parameters, 15 MB of parameters and
  // AdamW moments in one stage, past the 8 MiB above which a shard held by several nodes is
  // fetched in parts from each of them at once (train/src/state/shard_client.cpp).
  const auto model = dir.write("wide.yaml",
                               "name: tiny-wide\nlayers: 4\nhidden: 160\nheads: 4\nffn_hidden: 640\n"
                               "sequence: 32\nvocabulary: 128\ndtype: fp32\n");
  std::unique_ptr<child> coordinator;
  // No checkpoint on disk (--checkpoint-every 0): the state can only come from memory.
  const auto port = start_growth_coordinator(coordinator, dir, 2, iterations, {"--checkpoint-every", "0"}, model);
  // n0 and n1, one per zone: one stage of two replicas, each holding the whole model.
  auto n0 = start_node(dir, port, "n0", "local-a");
  auto n1 = start_node(dir, port, "n1", "local-b");
  require_training(*coordinator, iterations, 120s);
  // n2 joins: one stage of three replicas; n2's state comes from n0 and n1 at once.
  auto n2 = start_node(dir, port, "n2", "local-a");
  const auto job = wait_finished(*coordinator, dir, iterations, 200s);
  INFO(n2->err());
  check_nothing_run_again(job, iterations, model);
  CHECK(job.summary["replans"].get<int>() == 1);
  CHECK(most_holders_at_once(n2->err()) == 2);
  CHECK(fetched_over_transport(n2->err()) > std::int64_t{8} << 20);
  CHECK(n2->err().find("no file written") != std::string::npos);
}

}  // namespace integration_train_growth
#endif

