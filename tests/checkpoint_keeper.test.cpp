// Every node of a job gone at once (spot capacity taken), each node with a state folder of its
// own: with `sailor coordinator --keep-checkpoints` the coordinator holds a copy of the
// checkpoints, and the job resumed on a new node with an empty folder goes on from the newest
// one with the undisturbed loss curve, instead of starting over.

// Built only with LibTorch (the reference run needs the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "local_job.hpp"
#include "sailor/train/checkpoint.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_checkpoint_keeper {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

namespace fs = std::filesystem;

// The newest complete checkpoint of any plan folder under `kept` (0: none yet).
int newest_kept(const fs::path& kept) {
  int newest = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator i{kept, ec}, end; !ec && i != end; i.increment(ec))
    if (i->is_directory() && i->path().filename().string().rfind('v', 0) == 0)
      newest = std::max(newest, sailor::train::latest_checkpoint(i->path().string()));
  return newest;
}

}  // namespace

TEST_CASE("keeper: every node killed, a new node with an empty state folder resumes from the coordinator's copy of the checkpoint with the same loss curve") {
  temp_dir dir;
  constexpr int iterations = 30;
  auto token_file = dir.write("token", "keeper-test-token\n");
  std::unique_ptr<child> coordinator;
  const std::string port = start_listening(
    coordinator,
    training_coordinator_argv("127.0.0.1:0", dir.path("train"), 1, iterations,
                              {"--transport", "tcp", "--token-file", token_file, "--keep-checkpoints",
                               "--summary-json", dir.path("summary.json")}),
    dir.path("coordinator"));
  const auto node = [&](const std::string& name, const std::string& slowdown) {
    return node_argv("127.0.0.1:" + port, name, "local-a",
                     {"--token-file", token_file, "--state-dir", dir.path(name), "--slowdown", slowdown,
                      "--log-dir", ""});
  };
  // The first node is stretched 5 times, so that the kill lands mid-training on a loaded
  // machine too; the second trains what is left at its own speed (stretched, the rest took
  // over the 120 s bound on a machine loaded 3 times over).
  auto first = std::make_unique<child>(node("n1", "5"), dir.path("n1.out"), dir.path("n1.err"));
  // Once the coordinator holds a complete checkpoint after iteration 2 or later, n1 dies.
  const fs::path kept = fs::path{dir.path("train")} / "kept";
  const bool held = eventually(60s, [&] { return newest_kept(kept) >= 2; });
  INFO(coordinator->out());
  INFO(first->err());
  REQUIRE(held);
  first->signal(SIGKILL);
  REQUIRE(first->wait_exit(10s) >= 0);
  // Nothing of n1 is left to the job: its folder goes, as its machine would.
  fs::remove_all(dir.path("n1"));
  child second(node("n2", "1"), dir.path("n2.out"), dir.path("n2.err"));
  const int code = coordinator->wait_exit(120s);
  INFO(second.err());
  REQUIRE(code == 0);
  const auto out = coordinator->out();
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex{R"(training iterations (\d+)\.\.30 \(resumed from the checkpoint\))"}));
  const int resumed_at = std::stoi(m[1]);
  CHECK(resumed_at >= 3);  // after the checkpoint of iteration 2 or a later one
  check_printed_curve(out, iterations, resumed_at);
  const auto summary = read_json(dir.path("summary.json"));
  INFO(summary.dump());
  CHECK(summary["iterations_completed"].get<int>() == iterations);
  // The loss is one recovery: the whole state came over the transport from the keeper, and
  // the iterations n1 completed after that checkpoint are counted as run again.
  REQUIRE(summary["recovery"].size() == 1);
  CHECK(summary["state_source"].get<std::string>() == "checkpoint");
  CHECK(summary["bytes_restored"].get<std::int64_t>() >= 3 * 4 * 218496);
  const auto before = out.substr(0, out.find("plan v", out.find("plan v") + 1));
  const int completed_before = static_cast<int>(printed_losses(before, iterations).size());
  CHECK(summary["lost_iterations"].get<int>() == completed_before - (resumed_at - 1));
}

}  // namespace integration_checkpoint_keeper
#endif
