// Training survives a preemption: a sailor-node process is killed (SIGKILL) mid-training, the
// supervisor re-plans over the others, which restore the newest complete checkpoint and go
// on. The loss curve must be the one an undisturbed single rank gives, through `sailor demo`
// and through `sailor coordinator --train-dir` with nodes that join it.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_job.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_elastic {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

const std::string configs = sailor::testing::configs_dir();

// `sailor coordinator --train-dir` on port 0 over TCP; returns its port once it listens.
std::string start_coordinator(std::unique_ptr<child>& coordinator, const temp_dir& dir,
                              const std::string& model, int quorum, int iterations) {
  auto argv = coordinator_argv("127.0.0.1:0",
                               {"--quorum", std::to_string(quorum), "--settle-s", "30", "--heartbeat-ms", "200",
                                "--heartbeat-timeout-ms", "3000", "--transport", "tcp", "--token-file",
                                job_token_file(dir), "--train-dir", dir.path("train"), "--iterations",
                                std::to_string(iterations), "--exit-when-done", "--summary-json",
                                dir.path("summary.json")},
                               configs + "/models/" + model);
  return start_listening(coordinator, argv, dir.path("coordinator"));
}

std::unique_ptr<child> start_node(const temp_dir& dir, const std::string& port,
                                  const std::string& name, const std::string& zone) {
  auto node = std::make_unique<child>(
    node_argv("127.0.0.1:" + port, name, zone, {"--token-file", job_token_file(dir), "--state-dir", dir.path("train")}),
    dir.path(name + ".out"), dir.path(name + ".err"));
  REQUIRE(node->pid() > 0);
  return node;
}

// `sailor demo` on the tiny model and job with the measured profile kept in `dir`, even
// planner, 4 nodes in 2 zones; `options` follow.
nlohmann::json run_demo(const temp_dir& dir, const std::string& options) {
  return run_with_summary(sailor_bin() + " demo --nodes 4 --zones 2 --planner even --model " + configs +
                            "/models/tiny.yaml --job " + configs + "/jobs/tiny.yaml --profile " +
                            dir.path("profile.json") + " " + options,
                          dir, 150)
    .summary;
}

}  // namespace

TEST_CASE("elastic: sailor demo loses one replica of a DP=2 stage and resumes from the survivors' memory with no iteration lost and the same loss curve") {
  temp_dir dir;
  // 4 nodes in 2 zones: 2 stages of 2 replicas (one per zone). The kill takes node-3, a
  // replica of stage 1; the next plan (1 stage of 3 replicas: other stage boundaries) takes
  // every layer from the survivors' memory. The profile is measured once and reused; the
  // even planner makes that 2 x 2 layout (the search would put the job on fewer nodes).
  auto j = run_demo(dir, "--iterations 8 --preempt-at 3");
  CHECK(j["iterations_completed"].get<int>() == 8);
  CHECK(j["replans"].get<int>() == 1);
  CHECK(j["preempted"].get<std::vector<std::string>>() == std::vector<std::string>{"node-3"});
  // Every iteration completed before the kill is kept (3, or 4 when the fourth completed
  // on every rank before the kill landed): none is run again.
  auto resumed = j["resumed_at"].get<std::vector<int>>();
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0] >= 3);
  CHECK(j["lost_iterations"].get<int>() == 0);
  CHECK(j["state_source"].get<std::string>() == "replicas");
  // At least the state of the whole model (parameters and AdamW's two moments, fp32) came
  // over the transport.
  CHECK(j["bytes_restored"].get<std::int64_t>() >= 3 * 4 * 218496);
  auto recovery_s = j["recovery_s"].get<std::vector<double>>();
  REQUIRE(recovery_s.size() == 1);
  CHECK(recovery_s[0] > 0);
  REQUIRE(j["recovery"].size() == 1);
  CHECK(j["recovery"][0]["total_s"].get<double>() > 0);
  check_single_rank_curve(j, 8);
}

TEST_CASE("elastic: sailor demo loses a whole stage with notice and no iteration: the leaving nodes hand over their state") {
  temp_dir dir;
  // 2 stages of 2 replicas; both replicas of the newest node's stage (stage 1: node-2 and
  // node-3) get SIGTERM. No survivor of the next plan held those layers: they come from the
  // leaving nodes' memory, which stay until the next plan restored.
  auto j = run_demo(dir, "--iterations 8 --preempt-at 3 --preempt-mode notice --preempt-stage");
  CHECK(j["iterations_completed"].get<int>() == 8);
  CHECK(j["preempted"].get<std::vector<std::string>>() ==
        std::vector<std::string>{"node-2", "node-3"});
  CHECK(j["plan"]["stages"].get<int>() == 1);
  CHECK(j["lost_iterations"].get<int>() == 0);
  CHECK(j["state_source"].get<std::string>() == "replicas");
  CHECK(j["bytes_restored"].get<std::int64_t>() > 0);
  auto resumed = j["resumed_at"].get<std::vector<int>>();
  REQUIRE_FALSE(resumed.empty());
  CHECK(resumed.back() >= 3);
  check_single_rank_curve(j, 8);
}

TEST_CASE("elastic: sailor demo loses a whole stage by SIGKILL: resumed from the copies of its checkpoint on the other stage, the iterations after it run again and counted, the same loss curve") {
  temp_dir dir;
  // 2 stages of 2 replicas; both replicas of stage 1 (node-2, node-3) die without a word
  // after iteration 5. No survivor holds layers 3..5 in memory, and the checkpoint shards of
  // stage 1 were written by node-2 alone; but node-2 copied each to a node of stage 0 as it
  // wrote it. The next plan resumes from the newest checkpoint (every 2 iterations) with a
  // live copy: after iteration 4, or 2 when the kill landed before the copy of 4 arrived.
  auto run = run_with_summary(sailor_bin() + " demo --nodes 4 --zones 2 --planner even --model " + configs +
                                "/models/tiny.yaml --job " + configs + "/jobs/tiny.yaml --profile " +
                                dir.path("profile.json") +
                                " --iterations 8 --preempt-at 5 --preempt-stage --checkpoint-every 2 --no-dashboard",
                              dir, 150);
  const auto& j = run.summary;
  INFO(run.result.out);
  CHECK(j["iterations_completed"].get<int>() == 8);
  CHECK(j["preempted"].get<std::vector<std::string>>() ==
        std::vector<std::string>{"node-2", "node-3"});
  // The kill lands after iteration 5 completed (the demo printed it), or 6 when it completed
  // on every rank first.
  std::smatch killed;
  REQUIRE(std::regex_search(run.result.out, killed, std::regex{"preempting node-2 \\(SIGKILL\\) after iteration ([0-9]+)"}));
  const int done = std::stoi(killed[1]);
  auto resumed = j["resumed_at"].get<std::vector<int>>();
  REQUIRE_FALSE(resumed.empty());
  const int from = resumed.back();
  CHECK(from >= 2);
  CHECK(from % 2 == 0);  // a checkpoint's iteration
  CHECK(from <= done + 1);
  // From the checkpoint; or, when the kill landed right after one was copied, from the
  // survivors' memory for stage 0 and that checkpoint for stage 1.
  const auto source = j["state_source"].get<std::string>();
  CHECK((source == "checkpoint" || source == "mixed"));
  CHECK(run.result.out.find("the checkpoint after iteration " + std::to_string(from)) !=
        std::string::npos);
  // The iterations completed after the checkpoint run again, and are counted.
  const int lost = j["lost_iterations"].get<int>();
  CHECK(lost >= done - from);
  CHECK(lost <= done + 1 - from);
  check_single_rank_curve(j, 8);
}

TEST_CASE("elastic: sailor coordinator --train-dir trains the nodes that join and resumes after one is killed") {
  temp_dir dir;
  // Enough that `sailor status` (a LibTorch process) and the kill land mid-training.
  const int iterations = 40;
  std::unique_ptr<child> coordinator_process;
  const std::string port = start_coordinator(coordinator_process, dir, "tiny.yaml", 3, iterations);
  child& coordinator = *coordinator_process;
  std::vector<std::unique_ptr<child>> nodes;
  const char* zones[] = {"local-a", "local-b", "local-a"};
  for (int k = 0; k < 3; ++k)
    nodes.push_back(start_node(dir, port, "node-" + std::to_string(k), zones[k]));
  // Three iterations, then node-2 dies without a word.
  bool trained = eventually(90s, [&] { return coordinator.out().find("iteration 3/" + std::to_string(iterations)) != std::string::npos; });
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(trained);
  // `sailor status` shows the training's progress.
  auto st = run_command(sailor_bin() + " status 127.0.0.1:" + port + " --transport tcp --token-file " + job_token_file(dir) + " --json --timeout-ms 30000", 60);
  INFO(st.out);
  INFO(st.err);
  REQUIRE(st.exit_code == 0);
  auto status = nlohmann::json::parse(st.out);
  CHECK(status["training"]["total"].get<int>() == iterations);
  CHECK(status["training"]["completed"].get<int>() >= 3);
  CHECK(status["training"]["loss"].get<double>() > 0);
  nodes[2]->signal(SIGKILL);
  CHECK(nodes[2]->wait_exit(5s) == 128 + SIGKILL);
  const int code = coordinator.wait_exit(120s);
  std::string out = coordinator.out();
  INFO(out);
  INFO(coordinator.err());
  REQUIRE(code == 0);
  CHECK(out.find("training finished: " + std::to_string(iterations) + " iterations") !=
        std::string::npos);
  CHECK(out.find("(resumed from the survivors' memory)") != std::string::npos);
  // The last line printed for each iteration (iterations after the checkpoint run again).
  check_printed_curve(out, iterations);
  // The summary for automation carries the same figures as the demo's.
  auto j = read_json(dir.path("summary.json"));
  CHECK(j["iterations_completed"].get<int>() == iterations);
  CHECK(j["replans"].get<int>() == 1);
  // The coordinator's summary names its plan by version: the batch sizes are the printed ones.
  const auto [micro_batch, global_batch] = printed_batch(out);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(), single_rank_losses(micro_batch, global_batch, iterations));
  auto recovery_s = j["recovery_s"].get<std::vector<double>>();
  REQUIRE(recovery_s.size() == 1);
  CHECK(recovery_s[0] > 0);
  // One replica of the only stage survives: its state, nothing run again.
  CHECK(j["state_source"].get<std::string>() == "replicas");
  CHECK(j["lost_iterations"].get<int>() == 0);
  CHECK(j["bytes_restored"].get<std::int64_t>() > 0);
  CHECK(j["tokens_per_s"].get<double>() > 0);
  CHECK(j["measured_iteration_s"].get<double>() > 0);
  CHECK(j.contains("predicted_iteration_s"));
}

TEST_CASE("elastic: sailor coordinator --train-dir refuses a model that does not fit a device, before training") {
  temp_dir dir;
  std::unique_ptr<child> coordinator;
  const std::string port = start_coordinator(coordinator, dir, "opt-350m.yaml", 2, 2);
  auto a = start_node(dir, port, "node-0", "local-a");
  auto b = start_node(dir, port, "node-1", "local-b");
  bool refused = eventually(30s, [&] {
    return coordinator->err().find("does not fit a device's memory") != std::string::npos;
  });
  INFO(coordinator->out());
  INFO(coordinator->err());
  CHECK(refused);
  CHECK(coordinator->out().find("iteration ") == std::string::npos);
  CHECK(coordinator->out().find("plan v") == std::string::npos);
}

}  // namespace integration_train_elastic
#endif
