// `sailor replay`: an availability trace through the planner and re-planner, as a user runs it.
#include <doctest/doctest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_replay {

using namespace sailor::testing;

namespace {

const std::string sailor_data = std::string(SAILOR_DATA_DIR) + "/sailor";

// The output of one step: its header line and the lines under it.
std::vector<std::string> steps_of(const std::string& out) {
  std::vector<std::string> steps;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) == 0) steps.emplace_back();
    if (!steps.empty()) steps.back() += line + "\n";
  }
  return steps;
}

// The plan summary of a step ("mbs 4 | [0,14) ..." up to the estimate), empty when none.
std::string plan_of(const std::string& step) {
  std::smatch m;
  if (!std::regex_search(step, m, std::regex(R"(\n  (mbs [^\n]*?) \|\|)"))) return "";
  return m[1];
}

int state_kept_of(const std::string& step) {
  std::smatch m;
  if (!std::regex_search(step, m, std::regex(R"(state kept (\d+)%)"))) return -1;
  return std::stoi(m[1]);
}

}  // namespace

TEST_CASE("sailor replay re-plans each step from the previous plan and says how much state it kept") {
  temp_dir dir;
  // Two zones of 8 A100s; nothing changes; zone b is lost; everything is lost; both come back.
  auto trace = dir.write("trace.csv",
                         ",Timestamp,A100-40_us-central1-a,A100-40_us-central1-b\n"
                         "0,1,8,8\n"
                         "1,2,8,8\n"
                         "2,3,8,0\n"
                         "3,4,0,0\n"
                         "4,5,8,8\n");
  auto r = run_command(sailor_bin() + " replay --sailor-data " + sailor_data + " --model OPT-350 --trace " + trace +
                       " --gbs 64");
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto steps = steps_of(r.out);
  REQUIRE(steps.size() == 5);

  // Step 0 is planned from scratch: a plan, no state to keep.
  CHECK(contains(steps[0], "A100-40@us-central1-a=8 A100-40@us-central1-b=8"));
  CHECK_FALSE(plan_of(steps[0]).empty());
  CHECK(state_kept_of(steps[0]) == -1);

  // Nothing changed: the same plan, all of its state kept.
  CHECK(plan_of(steps[1]) == plan_of(steps[0]));
  CHECK(state_kept_of(steps[1]) == 100);

  // Zone b is gone: the new plan uses zone a only, and keeps what zone a held (all of it
  // when zone a's replicas held the whole model, as a data-parallel plan's do).
  const std::string after_loss = plan_of(steps[2]);
  REQUIRE_FALSE(after_loss.empty());
  CHECK_FALSE(contains(after_loss, "us-central1-b"));
  CHECK(contains(after_loss, "us-central1-a"));
  CHECK(state_kept_of(steps[2]) > 0);
  CHECK(state_kept_of(steps[2]) <= 100);

  // No GPUs at all: no plan, said plainly; the replay goes on.
  CHECK(contains(steps[3], "no plan"));
  CHECK(contains(steps[3], "no GPUs are available"));

  // Both zones back: re-planned from the last plan that ran (step 2's), which it partly keeps:
  // zone b held nothing in that plan, so what it takes on now must be moved there.
  CHECK_FALSE(plan_of(steps[4]).empty());
  CHECK(contains(plan_of(steps[4]), "us-central1-b"));
  const int kept = state_kept_of(steps[4]);
  CHECK(kept > 0);
  CHECK(kept < 100);
}

TEST_CASE("sailor replay refuses a bad trace with the place of the fault") {
  temp_dir dir;
  auto bad = dir.write("bad.csv", ",Timestamp,A100-40_us-central1-a\n0,1,8\n1,2,many\n");
  auto r = run_command(sailor_bin() + " replay --sailor-data " + sailor_data + " --model OPT-350 --trace " + bad);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.err, bad + ":3: column A100-40_us-central1-a: expected a count"));

  auto missing = run_command(sailor_bin() + " replay --sailor-data " + sailor_data + " --model OPT-350 --trace " +
                             dir.path("none.csv"));
  CHECK(missing.exit_code != 0);
  CHECK(contains(missing.err, "cannot open file"));

  auto empty = dir.write("empty.csv", "");
  auto e = run_command(sailor_bin() + " replay --sailor-data " + sailor_data + " --model OPT-350 --trace " + empty);
  CHECK(e.exit_code != 0);
  CHECK(contains(e.err, "empty trace"));
}

TEST_CASE("sailor replay --json: a spot trace slice through the simulator, ours against the baselines") {
  temp_dir dir;
  // Six hours of one AWS zone in 5-minute ticks: falls with notice (the default), to zero once.
  std::string data;
  const int counts[] = {16, 16, 12, 12, 16, 16, 16, 8, 8, 16, 16, 16, 0, 0, 4, 16, 16, 16};
  for (int rep = 0; rep < 4; ++rep)
    for (int c : counts) data += (data.empty() ? "" : ", ") + std::to_string(c);
  auto trace = dir.write("us-west-2a_v100_slice.json", R"({"metadata": {"gap_seconds": 300}, "data": [)" + data + "]}");
  const std::string src = SAILOR_SOURCE_DIR;
  const std::string common = sailor_bin() + " replay --trace " + trace + " --model " + src +
                             "/configs/models/opt-350m.yaml --job " + src + "/configs/jobs/max-throughput.yaml --cluster " +
                             src + "/configs/clusters/aws-v100-spot.yaml";
  auto r = run_command(common + " --json", 120);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"ours", "ours_peak_throughput", "restart_from_checkpoint", "static", "on_demand"}) {
    CAPTURE(key);
    REQUIRE(j.contains(key));
    const auto& p = j[key];
    for (const char* field : {"iterations", "dollars", "iterations_per_dollar", "lost_iterations", "recovery_s_total"})
      REQUIRE(p.contains(field));
    CHECK(p["iterations"].get<double>() > 0);
    CHECK(p["dollars"].get<double>() > 0);
    CHECK(p["iterations_per_dollar"].get<double>() ==
          doctest::Approx(p["iterations"].get<double>() / p["dollars"].get<double>()));
  }
  // On demand: never preempted, at 3.06 $/GPU-hour instead of 0.918: fewer iterations per dollar.
  CHECK(j["on_demand"]["lost_iterations"].get<double>() == 0);
  CHECK(j["on_demand"]["recovery_s_total"].get<double>() == 0);
  CHECK(j["ours"]["iterations_per_dollar"].get<double>() > 2 * j["on_demand"]["iterations_per_dollar"].get<double>());
  // Every fall comes with notice: nothing lost, but the falls cost recovery time.
  CHECK(j["ours"]["lost_iterations"].get<double>() == 0);
  CHECK(j["ours"]["recovery_s_total"].get<double>() > 0);
  // Without notice, restart-from-checkpoint rolls back to its checkpoints.
  auto nn = run_command(common + " --json --no-notice-fraction 1 --checkpoint-interval-s 1200", 120);
  REQUIRE(nn.exit_code == 0);
  const auto k = nlohmann::json::parse(nn.out);
  CHECK(k["restart_from_checkpoint"]["lost_iterations"].get<double>() > 0);
  CHECK(k["restart_from_checkpoint"]["iterations"].get<double>() < j["restart_from_checkpoint"]["iterations"].get<double>());

  // Bad input: a negative count, and no capacity at the start; named with the file and tick.
  auto neg = dir.write("us-west-2a_v100_bad.json", R"({"metadata": {"gap_seconds": 300}, "data": [16, 8, -2]})");
  auto b = run_command(sailor_bin() + " replay --trace " + neg + " --model " + src + "/configs/models/opt-350m.yaml --job " +
                       src + "/configs/jobs/max-throughput.yaml --json");
  CHECK(b.exit_code == 2);
  CHECK(contains(b.err, neg));
  CHECK(contains(b.err, "tick 2"));
  CHECK(contains(b.err, "negative count"));
  auto empty = dir.write("us-west-2c_v100_late.json", R"({"metadata": {"gap_seconds": 300}, "data": [0, 0, 8, 8]})");
  const std::string late = sailor_bin() + " replay --trace " + empty + " --model " + src +
                           "/configs/models/opt-350m.yaml --job " + src + "/configs/jobs/max-throughput.yaml --json";
  auto e = run_command(late);
  CHECK(e.exit_code == 2);
  CHECK(contains(e.err, empty));
  CHECK(contains(e.err, "no GPU available at the start"));
  auto skipped = run_command(late + " --skip-empty-start");
  CHECK(skipped.exit_code == 0);
}

}  // namespace integration_replay
