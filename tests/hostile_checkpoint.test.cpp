// Broken state on disk: a job trained by a coordinator and a node (TCP, a job token) leaves
// its checkpoints in the node's state folder; random bytes are written into the newest one's
// shard. When the job is started again the node must not offer it (it names the file), the
// coordinator falls back to the previous complete checkpoint, and the loss curve is still the
// undisturbed one.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "local_job.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_hostile_checkpoint {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

namespace fs = std::filesystem;

// Runs a coordinator and one node until training is done; returns the coordinator's output.
std::string train(const temp_dir& dir, const std::string& token_file, int iterations,
                  const std::string& run, std::string* log) {
  std::unique_ptr<child> coordinator_process;
  const std::string port = start_listening(
    coordinator_process,
    training_coordinator_argv("127.0.0.1:0", dir.path("train"), 1, iterations,
                              {"--settle-s", "30", "--transport", "tcp", "--token-file", token_file}),
    dir.path(run + "-coordinator"));
  child& coordinator = *coordinator_process;
  child node(node_argv("127.0.0.1:" + port, "n1", "local-a", {"--token-file", token_file, "--state-dir", dir.path("state")}),
             dir.path(run + "-node.out"), dir.path(run + "-node.err"));
  const int code = coordinator.wait_exit(120s);
  // The node finishes its last checkpoint write and leaves once the coordinator is gone.
  {
    INFO("the node's log: " << node.err());
    CHECK(node.wait_exit(30s) >= 0);
  }
  // The node checks its shards before it offers them (the coordinator reads no disk).
  *log = coordinator.err() + node.err();
  INFO(coordinator.out());
  INFO(*log);
  REQUIRE(code == 0);
  return coordinator.out();
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
  CHECK(printed_losses(out, 6).size() == 3);
  check_printed_curve(out, 6, 4);
}

}  // namespace integration_hostile_checkpoint
#endif
