// The job's figures for monitoring during `sailor demo`: the dashboard's /metrics, parsed as
// Prometheus' text format 0.0.4, against what the run reported in /api/status, /api/plan and
// /api/metrics; and --metrics-jsonl, one line per completed iteration with the same figures.

// Built only with LibTorch (the demo's nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "dashboard_support.hpp"
#include "exposition.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_dashboard_metrics {

using namespace std::chrono;
using nlohmann::json;
using namespace sailor::testing;

namespace {

constexpr int iterations = 10;

using sailor::testing::parse_exposition;

std::vector<json> jsonl_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in{path};
  std::string line;
  while (std::getline(in, line))
    out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("dashboard: /metrics in Prometheus' text format and --metrics-jsonl give the "
          "run's figures, one line per iteration") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  const std::string jsonl = dir.path("metrics.jsonl");
  dashboard_child demo{demo_with_dashboard_argv({"--model", configs + "/models/tiny.yaml", "--job",
                                                 configs + "/jobs/tiny.yaml", "--nodes", "2",
                                                 "--zones", "2", "--iterations",
                                                 std::to_string(iterations), "--metrics-jsonl",
                                                 jsonl},
                                                120),
                       dir, "demo", 20s};
  INFO(demo.output());
  REQUIRE(demo.web_port > 0);
  dashboard_client web{demo.web_port};
  // Training ends; the dashboard is held.
  json status;
  REQUIRE(eventually(180s, [&] {
    status = web.json("/api/status");
    return status.contains("training") && status["training"]["completed"] == iterations;
  }));
  const auto curve = web.json("/api/metrics")["points"];
  const auto plan = web.json("/api/plan");
  REQUIRE(curve.size() == iterations);
  const auto& last = curve.back();

  httplib::Client raw{"127.0.0.1", demo.web_port};
  auto answer = raw.Get("/metrics");
  REQUIRE(answer);
  CHECK(answer->status == 200);
  CHECK(answer->get_header_value("Content-Type").find("text/plain; version=0.0.4") == 0);
  const auto m = parse_exposition(answer->body);
  CHECK(m.types.at("sailor_iterations_completed_total") == "counter");
  CHECK(m.at("sailor_iterations_completed_total") == iterations);
  CHECK(m.at("sailor_iterations_planned") == iterations);
  CHECK(m.at("sailor_plan_version") == status["plan_version"].get<double>());
  CHECK(m.at("sailor_loss") == doctest::Approx(last["loss"].get<double>()));
  CHECK(m.at("sailor_tokens_per_second") == doctest::Approx(last["tokens_per_s"].get<double>()));
  CHECK(m.at("sailor_iteration_measured_seconds") ==
        doctest::Approx(last["measured_s"].get<double>()));
  CHECK(m.at("sailor_iteration_predicted_seconds") ==
        doctest::Approx(last["predicted_s"].get<double>()));
  double nodes = 0;
  for (const char* state : {"joined", "assigned", "idle", "ready"})
    nodes += m.at(std::string{"sailor_nodes{state=\""} + state + "\"}");
  CHECK(nodes == 2);
  // As many ready as the status shows (the search may leave a node of the two idle).
  double ready = 0;
  for (const auto& n : status["nodes"]) ready += n["state"] == "ready" ? 1 : 0;
  CHECK(ready >= 1);
  CHECK(m.at("sailor_nodes{state=\"ready\"}") == ready);
  // No re-plan and no recovery in this run: the families are there, without samples.
  CHECK(m.types.at("sailor_replans_total") == "counter");
  for (const auto& [name, value] : m.samples)
    CHECK(name.rfind("sailor_replans_total", 0) != 0);
  CHECK_FALSE(m.has("sailor_last_recovery_seconds"));
  // Two zones, one node each: the plan's stages or replicas talk across them.
  std::set<std::string> zones;
  for (const auto& st : plan["plan"]["stages"])
    for (const auto& r : st["replicas"])
      zones.insert(r["zone"].get<std::string>());
  if (zones.size() > 1)
    CHECK(m.at("sailor_cross_zone_bytes_per_iteration") > 0);
  if (plan["usd_per_hour"].get<double>() > 0)
    CHECK(m.at("sailor_usd_per_iteration") >=
          plan["usd_per_hour"].get<double>() * last["measured_s"].get<double>() / 3600 * 0.999);
  CHECK(m.at("sailor_checkpoint_behind_iterations") >= 0);

  // --metrics-jsonl: one line per iteration, in order, with the curve's figures.
  const auto lines = jsonl_lines(jsonl);
  REQUIRE(lines.size() == iterations);
  for (int k = 0; k < iterations; ++k) {
    INFO("line " << k << ": " << lines[k].dump());
    CHECK(lines[k]["iteration"] == k);
    CHECK(lines[k]["iterations_completed"] == k + 1);
    CHECK(lines[k]["loss"].get<double>() == doctest::Approx(curve[k]["loss"].get<double>()));
    CHECK(lines[k]["iteration_measured_s"].get<double>() ==
          doctest::Approx(curve[k]["measured_s"].get<double>()));
    CHECK(lines[k]["nodes"]["ready"].get<int>() + lines[k]["nodes"]["assigned"].get<int>() +
            lines[k]["nodes"]["idle"].get<int>() + lines[k]["nodes"]["joined"].get<int>() == 2);
  }
  CHECK(lines.back()["cross_zone_bytes_per_iteration"] ==
        (m.has("sailor_cross_zone_bytes_per_iteration")
           ? json(m.at("sailor_cross_zone_bytes_per_iteration"))
           : json(nullptr)));
  demo.signal(SIGTERM);
  CHECK(demo.wait_exit(30s) == 0);
}

TEST_CASE("dashboard: --metrics-jsonl that cannot be opened is refused before training") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  const std::string bad = dir.path("no-such-folder/metrics.jsonl");
  auto r = run_command(sailor_bin() + " demo --model " + configs + "/models/tiny.yaml --job " +
                         configs + "/jobs/tiny.yaml --nodes 1 --iterations 1 --no-dashboard "
                         "--metrics-jsonl " + bad,
                       60);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--metrics-jsonl") != std::string::npos);
  CHECK(r.err.find(bad) != std::string::npos);
}

}  // namespace integration_dashboard_metrics
#endif
