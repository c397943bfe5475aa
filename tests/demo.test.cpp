// `sailor demo` end to end: a coordinator and sailor-node processes train the tiny model
// through the actor runtime, and the loss curve must be the one the same model, seed and
// data give on a single rank in this process; on its own defaults the demo trains a
// character-level model on the fortunes-min quotes and prints a sample.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_job.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_demo {

using namespace sailor::testing;

namespace {

using namespace sailor;
const std::string configs = configs_dir();
// The tiny model on the synthetic stream (the demo's own job trains on text: demo_text below).
const std::string tiny_demo =
  " demo --job " + configs + "/jobs/tiny.yaml --model " + configs + "/models/tiny.yaml";

// The demo failed (exit 1) saying `why` before it trained any iteration.
void check_refused_before_training(const command_result& r, const std::string& why) {
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(why) != std::string::npos);
  CHECK(r.out.find("iteration ") == std::string::npos);
}

}  // namespace

TEST_CASE("sailor demo trains over node processes and matches a single-rank run") {
  temp_dir dir;
  auto j = run_with_summary(sailor_bin() + tiny_demo + " --nodes 2 --zones 2 --iterations 10", dir, 90).summary;
  CHECK(j["iterations_completed"].get<int>() == 10);
  auto curve = j["loss_curve"].get<std::vector<double>>();
  REQUIRE(curve.size() == 10);
  CHECK(curve.back() < 0.95 * curve.front());
  CHECK(j["tokens_per_s"].get<double>() > 0);
  CHECK(j["measured_iteration_s"].get<double>() > 0);
  CHECK(j["predicted_iteration_s"].get<double>() > 0);
  CHECK(j["replans"].get<int>() == 0);
  // The plan is the search's, on the model's profile measured on this machine, predicted per
  // stage (each stage's compute bounded by the whole iteration).
  CHECK(j["planner"] == "search");
  CHECK(j["prediction_note"].get<std::string>().find("profile") != std::string::npos);
  REQUIRE(j["predicted_stage_s"].size() == j["plan"]["stages"].get<std::size_t>());
  for (const auto& st : j["predicted_stage_s"]) {
    CHECK(st["compute_s"].get<double>() > 0);
    CHECK(st["compute_s"].get<double>() <= j["predicted_iteration_s_uncorrected"].get<double>());
  }
  check_single_rank_curve(j, 10);
}

TEST_CASE("sailor demo refuses a model that does not fit a device, before training") {
  auto r = run_command(sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --nodes 2 --zones 2 --iterations 2 --model " +
                         configs + "/models/opt-350m.yaml --join-timeout-s 20",
                       60);
  check_refused_before_training(r, "does not fit");
}

TEST_CASE("sailor demo refuses a plan that does not match the nodes that joined") {
  temp_dir dir;
  // Two stages in zone local-a, but only one node (one device) is there.
  auto plan = dir.write(
      "plan.yaml",
      "micro_batch: 1\nglobal_batch: 8\nstages:\n"
      "  - layers: {first: 0, count: 3}\n"
      "    replicas: [{gpu: CPU, zone: local-a, tp: 1}]\n"
      "  - layers: {first: 3, count: 3}\n"
      "    replicas: [{gpu: CPU, zone: local-a, tp: 1}]\n");
  auto r = run_command(sailor_bin() + tiny_demo + " --nodes 2 --zones 2 --iterations 2 --plan " + plan +
                         " --join-timeout-s 20",
                       60);
  check_refused_before_training(r, "refused before training");
}

TEST_CASE("sailor demo ends with a clear error when a node cannot join") {
  // A "node" program that exits at once: the demo must say so, not wait for ever.
  auto r = run_command(sailor_bin() + tiny_demo + " --nodes 2 --zones 1 --iterations 2 --node-binary "
                                      "/bin/false --join-timeout-s 10",
                       40);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("before joining") != std::string::npos);
}

TEST_CASE("sailor demo holds activations between zones for the cluster's link") {
  // Two stages in two zones joined by an 80 ms link: the links travel in the training job to
  // the node processes, and each iteration (4 micro-batches, 2 round trips of the 1F1B
  // schedule over the link) takes at least 4 latencies; the loss curve is unchanged.
  temp_dir dir;
  auto cluster = dir.write(
      "slow.yaml",
      "name: slow\ngpus:\n"
      "  - {name: CPU, peak_fp16_tflops: 0.05, peak_fp32_tflops: 0.05, memory_gib: 2, "
      "gpus_per_node: 2}\n"
      "zones:\n  - {name: local-a, region: local, gpus: {CPU: 1}}\n"
      "  - {name: local-b, region: local, gpus: {CPU: 1}}\n"
      "links:\n  - {from: local-a, to: local-b, latency_ms: 80, bandwidth_gbytes_per_s: 1}\n");
  auto plan = dir.write(
      "plan.yaml",
      "micro_batch: 2\nglobal_batch: 8\nstages:\n"
      "  - layers: {first: 0, count: 3}\n"
      "    replicas: [{gpu: CPU, zone: local-a, tp: 1}]\n"
      "  - layers: {first: 3, count: 3}\n"
      "    replicas: [{gpu: CPU, zone: local-b, tp: 1}]\n");
  auto j = run_with_summary(sailor_bin() + tiny_demo + " --nodes 2 --zones 2 --iterations 3 --cluster " + cluster +
                              " --plan " + plan,
                            dir, 90)
             .summary;
  auto each = j["measured_iteration_s_each"].get<std::vector<double>>();
  REQUIRE(each.size() == 3);
  for (double t : each) CHECK(t > 0.95 * 4 * 0.080);
  // The simulator knows the link too.
  CHECK(j["predicted_iteration_s"].get<double>() > 4 * 0.080);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(), single_rank_losses(2, 8, 3));
}

TEST_CASE("sailor demo on its defaults trains on the fortunes-min quotes and ends with a sample") {
  temp_dir dir;
  auto summary = dir.path("summary.json");
  auto r = run_command(sailor_bin() + " demo --nodes 2 --zones 2 --iterations 3 --summary-json " +
                         summary,
                       120);
  INFO(r.out);
  INFO(r.err);
  bool installed = true;
  for (const char* f : {"fortunes", "literature", "riddles"})
    installed = installed && std::filesystem::exists(std::string("/usr/share/games/fortunes/") + f);
  if (!installed) {
    // Without the package: a clear error naming it, before any node starts.
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("fortunes-min") != std::string::npos);
    CHECK(r.out.find("joined") == std::string::npos);
    return;
  }
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("model char-gpt-4x64 (gpt2,") != std::string::npos);
  auto j = read_json(summary);
  CHECK(j["model"] == "char-gpt-4x64");
  REQUIRE(j["data"].is_string());
  CHECK(j["data"].get<std::string>().find("fortunes.txt") != std::string::npos);
  CHECK(j["loss_curve"].size() == 3);
  // The job validates every 100 iterations and after the last.
  REQUIRE(j["val_loss_curve"].size() == 1);
  CHECK(j["val_loss_curve"][0][0].get<int>() == 3);
  const double val = j["val_loss_curve"][0][1].get<double>();
  CHECK(val > 0);
  CHECK(val < 6);  // ln 96 = 4.56 for a uniform guess
  // The sample continues the default prompt with characters of the quotes.
  REQUIRE(j["sample"].is_string());
  const auto sample = j["sample"].get<std::string>();
  CHECK(sample.rfind("The ", 0) == 0);
  CHECK(sample.size() >= 4 + 200);
  CHECK(r.out.find("sample of the trained model") != std::string::npos);
}

}  // namespace integration_demo
#endif  // __has_include(<sailor/models/shapes.hpp>)
