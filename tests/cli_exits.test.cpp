// How commands wait and end (issues 37 and 36): a node that finds no coordinator exits 3
// (unavailable), its default state and log folders are the same run after run, the
// coordinator's help says its drift default plainly, SIGINT of `sailor train` says what
// happened and where the job's state is, a job whose cost limit no plan meets is refused
// naming the field, and `sailor demo --dashboard-hold S` holds (Ctrl-C ends the hold).
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cli_exits {

using namespace std::chrono;
using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {
const std::string configs = configs_dir();

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

TEST_CASE("sailor-node: no coordinator within --join-timeout is unavailable (exit 3)") {
  const int port = free_port();
  REQUIRE(port > 0);
  temp_dir dir;
  auto r = run_command(sailor_bin("sailor-node") + " --join 127.0.0.1:" + std::to_string(port) +
                         " --zone local-a --join-timeout 1 --state-dir " + dir.path("state") + " --log-dir ''",
                       60);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.err, "no coordinator at 127.0.0.1:" + std::to_string(port) + " within --join-timeout 1 s"));
}

TEST_CASE("sailor-node: without --name, --state-dir and --log-dir, every run uses the same state folder and log") {
  const int port = free_port();
  REQUIRE(port > 0);
  temp_dir dir;
  fs::create_directories(dir.path("work"));
  // Run from work/ with Sailor's cache folder under the test's (run_command runs the line
  // under `timeout`: the shell's `cd` goes inside sh -c).
  const std::string node = "sh -c 'cd " + dir.path("work") + " && XDG_CACHE_HOME=" + dir.path("cache") +
                           " exec " + sailor_bin("sailor-node") + " --join 127.0.0.1:" + std::to_string(port) +
                           " --zone local-a --join-timeout 1'";
  for (int run = 0; run < 3; ++run) {
    auto r = run_command(node, 60);
    INFO(r.err);
    CHECK(r.exit_code == 3);
  }
  // One folder of this host however many runs, with this run's log and the one before's.
  std::vector<std::string> folders;
  for (const auto& e : fs::directory_iterator(dir.path("cache/sailor")))
    folders.push_back(e.path().filename().string());
  INFO(folders.size());
  REQUIRE(folders.size() == 1);
  CHECK(folders[0] == "node-" + host_name() + "-0");
  const fs::path state = dir.path("cache/sailor") + "/" + folders[0];
  CHECK(contains(slurp((state / "node.log").string()), "no coordinator at"));
  CHECK(fs::exists(state / "node.previous.log"));
  CHECK(fs::is_empty(dir.path("work")));  // no sailor-logs/ where it was started
}

TEST_CASE("sailor coordinator --help says drift re-planning is on by default without a stray value") {
  auto r = run_command(sailor_bin() + " coordinator --help", 60);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "--no-replan-on-drift"));
  CHECK(contains(r.out, "(default: on)"));
  CHECK_FALSE(contains(r.out, "{false}"));
}

// Built only with LibTorch (the nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

TEST_CASE("sailor train: SIGINT says it was interrupted and where the job's state is, and exits 1") {
  temp_dir dir;
  child train{{sailor_bin(), "train", "--model", configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml",
               "--nodes", "1", "--zones", "1", "--planner", "even", "--iterations", "100000", "--no-dashboard",
               "--out", dir.path("run")},
              dir.path("train.out"), dir.path("train.err")};
  const bool training = eventually(120s, [&] { return contains(train.out(), " loss "); });
  INFO(train.out());
  REQUIRE(training);
  train.signal(SIGINT);
  const int code = train.wait_exit(60s);
  const auto err = train.err();
  INFO(err);
  CHECK(code == 1);
  CHECK(contains(err, "interrupted after"));
  std::smatch kept;
  REQUIRE(std::regex_search(err, kept, std::regex{"the run's state (and node logs )?(is|are) kept in ([^:,\\s]+)"}));
  CHECK(kept[3].str() == dir.path("run"));
  CHECK(fs::is_directory(dir.path("run") + "/state"));
}

TEST_CASE("sailor train refuses a job whose max_cost_per_iteration_usd no plan meets, naming the field") {
  temp_dir dir;
  const auto job = dir.write("job.yaml", slurp(configs + "/jobs/tiny.yaml") +
                                           "constraints:\n  max_cost_per_iteration_usd: 1.0e-12\n");
  auto r = run_command(sailor_bin() + " train --model " + configs + "/models/tiny.yaml --job " + job +
                         " --nodes 1 --zones 1 --planner even --iterations 4 --no-dashboard --out " + dir.path("run"),
                       180);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "job.constraints.max_cost_per_iteration_usd"));
  CHECK_FALSE(contains(r.out, " loss "));  // nothing trained
}

TEST_CASE("sailor demo --dashboard-hold S serves the dashboard S seconds after training, and Ctrl-C ends the hold") {
  temp_dir dir;
  child demo{{sailor_bin(), "demo", "--model", configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml",
              "--nodes", "1", "--zones", "1", "--planner", "even", "--iterations", "2", "--dashboard", "127.0.0.1:0",
              "--dashboard-hold", "120"},
             dir.path("demo.out"), dir.path("demo.err")};
  const bool holding = eventually(120s, [&] { return contains(demo.out(), "for 120 s more"); });
  INFO(demo.out());
  INFO(demo.err());
  REQUIRE(holding);
  // Still serving a while later (it once returned at once).
  CHECK(demo.wait_exit(3s) == -1);
  demo.signal(SIGINT);
  CHECK(demo.wait_exit(60s) == 0);
}

#endif

}  // namespace integration_cli_exits
