// The closed loop end to end (issue 14): `sailor demo --straggler-at K` slows the node the plan
// runs on (sailor-node --slowdown-file and SIGUSR2) after K iterations; the job must notice it
// from the ranks' telemetry, re-plan around it, and get its throughput back.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

using sailor::testing::run_command;
using sailor::testing::sailor_bin;
using sailor::testing::temp_dir;

TEST_CASE("sailor demo notices a straggler from telemetry and re-plans around it") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  const auto summary = dir.path("summary.json");
  auto r = run_command(sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --model " +
                         configs + "/models/tiny.yaml --nodes 2 --zones 1 --iterations 16 " +
                         "--straggler-at 4 --straggler-slowdown 5 --no-dashboard --summary-json " +
                         summary,
                       120);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(summary);
  REQUIRE(in);
  auto j = nlohmann::json::parse(in);
  CHECK(j["iterations_completed"].get<int>() == 16);
  // One re-plan, for the drift, naming the slow node; none for noise.
  CHECK(j["replans"].get<int>() == 1);
  REQUIRE(j["replan_reasons"].size() == 1);
  const auto reason = j["replan_reasons"][0].get<std::string>();
  CHECK(reason.find("node-") != std::string::npos);
  CHECK(reason.find("slower") != std::string::npos);
  CHECK(r.out.find("slowing node-") != std::string::npos);
  // Throughput: the straggler costs, the plan without it wins it back.
  const double before = j["tokens_per_s_before"].get<double>();
  const double during = j["tokens_per_s_during"].get<double>();
  const double after = j["tokens_per_s_after"].get<double>();
  CHECK(during > 0);
  CHECK(during < 0.7 * before);
  CHECK(after > 1.5 * during);
}
