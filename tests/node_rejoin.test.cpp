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

#include <filesystem>
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

std::vector<std::string> rejoin_coordinator_argv(const temp_dir& dir, int port, int iterations,
                                                 const std::string& summary = {},
                                                 const std::string& token_file = {}) {
  std::vector<std::string> extra{"--settle-s", "60", "--heartbeat-ms", "200", "--heartbeat-timeout-ms", "5000",
                                 "--transport", "tcp", "--token-file",
                                 token_file.empty() ? job_token_file(dir) : token_file};
  if (!summary.empty())
    extra.insert(extra.end(), {"--summary-json", summary});
  return training_coordinator_argv("127.0.0.1:" + std::to_string(port), dir.path("train"), 1, iterations, extra);
}

// The first number `pattern`'s group matches in `text` (-1: no match).
int first_number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex{pattern}) ? std::stoi(m[1]) : -1;
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

// Issue 39: the restarted coordinator continues the job of its journal (--train-dir/journal):
// its plan versions go on, its summary holds the whole loss curve once, and its first
// iteration closes a "coordinator_restart" recovery record.
TEST_CASE("rejoin: after its coordinator is killed and started again, the node joins the new one and the job finishes") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  const int iterations = 40;
  auto first = std::make_unique<child>(rejoin_coordinator_argv(dir, port, iterations, dir.path("s1.json")),
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
  const int first_plans = first_number(first->out(), "plan v([0-9]+): ");
  REQUIRE(first_plans >= 1);
  child second{rejoin_coordinator_argv(dir, port, iterations, dir.path("s2.json")), dir.path("c2.out"),
               dir.path("c2.err")};
  const int code = second.wait_exit(150s);
  const auto out = second.out();
  INFO(out);
  INFO(second.err());
  REQUIRE(code == 0);
  CHECK(out.find("continuing the job of " + dir.path("train") + "/journal") != std::string::npos);
  // Plan versions go on from the journal (a v1 again would reuse v1's checkpoint folder).
  CHECK(first_number(out, "plan v([0-9]+): ") > first_plans);
  const bool took_over = out.find("took over after the coordinator restarted in ") != std::string::npos;
  CHECK(took_over);
  // The summary counts every iteration once, on the uninterrupted curve.
  const auto summary = read_json(dir.path("s2.json"));
  CHECK(summary["iterations_completed"] == iterations);
  const auto [micro_batch, global_batch] = printed_batch(out);
  check_same_curve(summary["loss_curve"].get<std::vector<double>>(),
                   single_rank_losses(micro_batch, global_batch, iterations));
  bool restart_recorded = false;
  for (const auto& r : summary["recovery"])
    if (r["cause"] == "coordinator_restart") {
      restart_recorded = true;
      MESSAGE("coordinator restart: " << r["total_s"].get<double>() << " s to the next iteration, "
              << r["lost_iterations"].get<int>() << " iterations run again, state from "
              << r["state_source"].get<std::string>());
    }
  CHECK(restart_recorded);
  // The node offered the checkpoints it kept and the state its rank keeps in memory; the new
  // coordinator resumed from them (memory first when it is as new as the journal).
  std::smatch resumed;
  REQUIRE(std::regex_search(out, resumed, std::regex{"training iterations ([0-9]+)\\.\\." +
                                                     std::to_string(iterations) +
                                                     " \\(resumed from (the checkpoint|the survivors' memory)\\)"}));
  const int from = std::stoi(resumed[1]);
  CHECK(from > 1);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  check_printed_curve(out, iterations, from);
  CHECK(node.wait_exit(30s) == 0);
  // Another job's token on the same train folder: refused, the journal named and untouched.
  const auto journal = slurp(dir.path("train") + "/journal");
  const auto other_token = dir.write("other-token", "another-job-token\n");
  child third{rejoin_coordinator_argv(dir, port, iterations, {}, other_token), dir.path("c3.out"),
              dir.path("c3.err")};
  CHECK(third.wait_exit(60s) == 2);
  INFO(third.err());
  CHECK(third.err().find(dir.path("train") + "/journal") != std::string::npos);
  CHECK(third.err().find("another job") != std::string::npos);
  CHECK(slurp(dir.path("train") + "/journal") == journal);
}

// Issue 39, item 2: without checkpoints on disk, the node that lost its coordinator keeps its
// ranks' state in memory and offers it when it joins the restarted one, which resumes from it.
TEST_CASE("rejoin: without checkpoints on disk, a restarted coordinator resumes from the state the node kept in memory") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  const int iterations = 20;
  auto argv = [&] {
    auto a = rejoin_coordinator_argv(dir, port, iterations);
    a.insert(a.end(), {"--checkpoint-every", "0"});
    return a;
  };
  auto first = std::make_unique<child>(argv(), dir.path("c1.out"), dir.path("c1.err"));
  child node{rejoin_node_argv(port, dir), dir.path("node.out"), dir.path("node.err")};
  REQUIRE(eventually(120s, [&] { return first->out().find("iteration 5/20") != std::string::npos; }));
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(10s) == 128 + SIGKILL);
  REQUIRE(eventually(30s, [&] { return node.err().find("joining again") != std::string::npos; }));
  child second{argv(), dir.path("c2.out"), dir.path("c2.err")};
  const int code = second.wait_exit(150s);
  const auto out = second.out();
  INFO(out);
  INFO(node.err());
  REQUIRE(code == 0);
  const int from = first_number(out, "training iterations ([0-9]+)\\.\\.20 \\(resumed from the survivors' memory\\)");
  CHECK(from > 5);
  CHECK(out.find("training finished: 20 iterations") != std::string::npos);
  check_printed_curve(out, iterations, std::max(from, 1));
  CHECK(node.wait_exit(30s) == 0);
}

TEST_CASE("rejoin: a node whose coordinator never comes back exits after --coordinator-grace, its state kept") {
  temp_dir dir;
  const int port = free_port();
  REQUIRE(port > 0);
  child coordinator{rejoin_coordinator_argv(dir, port, 1000), dir.path("c.out"), dir.path("c.err")};
  auto argv = rejoin_node_argv(port, dir);
  argv.insert(argv.end(), {"--coordinator-grace", "2"});
  child node{argv, dir.path("node.out"), dir.path("node.err")};
  REQUIRE(eventually(120s, [&] { return coordinator.out().find("iteration 3/1000") != std::string::npos; }));
  coordinator.signal(SIGKILL);
  REQUIRE(coordinator.wait_exit(10s) == 128 + SIGKILL);
  const int code = node.wait_exit(60s);
  INFO(node.err());
  CHECK(code == 1);
  CHECK(node.err().find("within --coordinator-grace 2 s") != std::string::npos);
  CHECK(node.err().find("state folder " + dir.path("state") + " is kept") != std::string::npos);
  // What it trained is still on its disk for a coordinator started later.
  bool shards = false;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path("state")))
    shards = shards || f.path().extension() == ".ckpt";
  CHECK(shards);
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
