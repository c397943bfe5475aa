// `sailor replay`: an availability trace through the planner and re-planner, as a user runs it.
#include <doctest/doctest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.hpp"

using sailor::testing::run_command;
using sailor::testing::sailor_bin;
using sailor::testing::temp_dir;

namespace {

const std::string sailor_data = std::string(SAILOR_DATA_DIR) + "/sailor";

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

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
