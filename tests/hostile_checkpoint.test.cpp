// Broken state on disk: a job trained by a coordinator and a node (TCP, a job token) leaves
// its checkpoints in the node's state folder; random bytes are written into the newest one's
// shard. When the job is started again the node must not offer it (it names the file), the
// coordinator falls back to the previous complete checkpoint, and the loss curve is still the
// undisturbed one.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
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

const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
namespace fs = std::filesystem;

// Runs a coordinator and one node until training is done; returns the coordinator's output.
std::string train(const temp_dir& dir, const std::string& token_file, int iterations,
                  const std::string& run, std::string* log) {
  child coordinator(
    std::vector<std::string>{sailor_bin(), "coordinator", "--planner", "even", "--listen", "127.0.0.1:0", "--cluster",
                             configs + "/clusters/local-2-zones.yaml", "--model",
                             configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml",
                             "--quorum", "1", "--settle-s", "30", "--transport", "tcp",
                             "--token-file", token_file, "--train-dir", dir.path("train"),
                             "--iterations", std::to_string(iterations), "--exit-when-done"},
    dir.path(run + "-coordinator.out"), dir.path(run + "-coordinator.err"));
  REQUIRE(coordinator.pid() > 0);
  const std::string port = listening_port(coordinator);
  INFO(coordinator.err());
  REQUIRE(!port.empty());
  child node(std::vector<std::string>{sailor_bin("sailor-node"), "--join",
                                      "127.0.0.1:" + port, "--zone", "local-a",
                                      "--devices", "cpu:1", "--name", "n1", "--transport", "tcp",
                                      "--token-file", token_file, "--state-dir",
                                      dir.path("state")},
             dir.path(run + "-node.out"), dir.path(run + "-node.err"));
  const int code = coordinator.wait_exit(120s);
  // The node finishes its last checkpoint write and leaves once the coordinator is gone.
  CHECK(node.wait_exit(30s) >= 0);
  // The node checks its shards before it offers them (the coordinator reads no disk).
  *log = coordinator.err() + node.err();
  INFO(coordinator.out());
  INFO(*log);
  REQUIRE(code == 0);
  return coordinator.out();
}

std::map<int, double> losses(const std::string& out, int iterations) {
  std::map<int, double> loss;
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) + "  loss ([-0-9.naif]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  return loss;
}

}  // namespace

TEST_CASE("hostile: a corrupt checkpoint shard is named and skipped, training resumes from the previous one with the same loss curve") {
  temp_dir dir;
  auto token_file = dir.write("token", "checkpoint-test-token\n");
  std::string log;
  train(dir, token_file, 4, "first", &log);
  // The newest complete checkpoint (after iteration 4): 4 KiB of random bytes in its shard.
  // In the node's state folder: checkpoints/<job>/v1/iter-00000004.
  fs::path folder;
  for (auto& e : fs::recursive_directory_iterator(fs::path(dir.path("state")) / "checkpoints"))
    if (e.is_directory() && e.path().filename() == "iter-00000004") folder = e.path();
  REQUIRE(!folder.empty());
  std::vector<fs::path> shards;
  for (auto& e : fs::directory_iterator(folder))
    if (e.path().extension() == ".ckpt") shards.push_back(e.path());
  REQUIRE(shards.size() == 1);
  REQUIRE(fs::exists(folder.parent_path() / "iter-00000003"));
  {
    const auto size = fs::file_size(shards[0]);
    REQUIRE(size > 8192);
    std::fstream io(shards[0], std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(static_cast<std::streamoff>(size - 6000));
    std::mt19937 rng(4);
    for (int i = 0; i < 4096; ++i) io.put(static_cast<char>(rng()));
  }
  auto out = train(dir, token_file, 6, "second", &log);
  CHECK(log.find(shards[0].string()) != std::string::npos);
  CHECK(log.find("does not match its checksum") != std::string::npos);
  CHECK(out.find("training iterations 4..6 (resumed from the checkpoint)") != std::string::npos);
  auto loss = losses(out, 6);
  REQUIRE(loss.size() == 3);
  std::smatch batch;
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  REQUIRE(std::regex_search(out, batch, sizes));
  auto reference = single_rank_losses(std::stoi(batch[1]), std::stoi(batch[2]), 6);
  for (int k = 4; k <= 6; ++k) {
    INFO("iteration " << k << ": run " << loss[k] << ", single rank " << reference[k - 1]);
    CHECK(std::abs(loss[k] - reference[k - 1]) <= 1e-4 * std::abs(reference[k - 1]));
  }
}

#endif
