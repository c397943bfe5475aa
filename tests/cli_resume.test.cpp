// A job outlives its coordinator (issue 19, item 1): `sailor coordinator --train-dir D` is
// started three times on the same D with more iterations each time; every run trains only
// the iterations after the checkpoint, says it finished and exits, and so do its nodes. The
// count of completed iterations comes from the job's own record (the checkpoint), not from
// what this coordinator process saw. Also: one line per iteration, numbered from 1, no
// "predicted 0", no signal number on a normal finish, and the node's log in its --log-dir.

// Built only with LibTorch (the nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cli_resume {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

struct run_output {
  int coordinator_code = -1;
  int node_code = -1;
  std::string out, err;
};

// One coordinator (quorum 1) and one node on `train_dir` until the coordinator exits.
run_output train_until(const temp_dir& dir, const std::string& run, int iterations) {
  std::unique_ptr<child> coordinator_process;
  const std::string port = start_listening(
    coordinator_process,
    training_coordinator_argv("127.0.0.1:0", dir.path("train"), 1, iterations,
                              {"--settle-s", "30", "--heartbeat-ms", "200", "--heartbeat-timeout-ms", "3000",
                               "--transport", "tcp", "--token-file", job_token_file(dir)}),
    dir.path(run));
  child& coordinator = *coordinator_process;
  child node{node_argv("127.0.0.1:" + port, "node-" + run, "local-a",
                       {"--token-file", job_token_file(dir), "--log-dir", dir.path("logs"),
                        // the same machine's folder each run: the checkpoints the job resumes from
                        "--state-dir", dir.path("state")}),
             dir.path(run + "-node.out"), dir.path(run + "-node.err")};
  REQUIRE(node.pid() > 0);
  run_output r;
  r.coordinator_code = coordinator.wait_exit(90s);
  r.node_code = node.wait_exit(20s);
  r.out = coordinator.out();
  r.err = coordinator.err();
  return r;
}

int count(const std::string& text, const std::regex& pattern) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("a coordinator restarted twice on an existing job trains what is left and finishes each time") {
  temp_dir dir;
  struct step {
    int iterations;
    int first;  // the first iteration this run trains (1-based)
  };
  int run = 0;
  for (const step s : {step{2, 1}, step{4, 3}, step{6, 5}}) {
    const std::string name = "run" + std::to_string(++run);
    auto r = train_until(dir, name, s.iterations);
    INFO(name << " stdout:\n" << r.out);
    INFO(name << " stderr:\n" << r.err);
    REQUIRE(r.coordinator_code == 0);
    CHECK(r.node_code == 0);
    const std::string total = "/" + std::to_string(s.iterations);
    CHECK(r.out.find("training iterations " + std::to_string(s.first) + ".." + std::to_string(s.iterations)) !=
          std::string::npos);
    CHECK(r.out.find("training finished: " + std::to_string(s.iterations) + " iterations") != std::string::npos);
    // Each iteration of this run printed once, numbered from 1; none of the earlier runs'.
    for (int k = 1; k <= s.iterations; ++k) {
      const int lines = count(r.out + r.err, std::regex{"iteration " + std::to_string(k) + total + " "});
      CHECK_MESSAGE(lines == (k >= s.first ? 1 : 0), "iteration " << k << ": " << lines << " lines");
    }
    CHECK(r.err.find("predicted 0.000") == std::string::npos);
    CHECK(r.err.find("signal") == std::string::npos);
    CHECK(r.out.find("signal") == std::string::npos);
    // The node's log went to its file as well as to the terminal.
    const auto log = dir.path("logs") + "/node-" + name + ".log";
    CHECK(std::filesystem::exists(log));
    CHECK(slurp(log).find("node-" + name) != std::string::npos);
  }
  // Once more with nothing left to train: it says so and exits instead of waiting.
  auto again = train_until(dir, "run4", 6);
  INFO("run4 stdout:\n" << again.out);
  INFO("run4 stderr:\n" << again.err);
  CHECK(again.coordinator_code == 0);
  CHECK(again.out.find("training already complete (6 iterations)") != std::string::npos);
}

}  // namespace integration_cli_resume
#endif  // __has_include(<sailor/models/shapes.hpp>)
