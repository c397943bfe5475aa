// The dashboard during `sailor demo` with a node killed mid-training: the API's loss curve,
// measured and predicted times, the re-plan with its recovery time, the trace of the ranks'
// phases; and the page in headless Chromium (when chromium-headless-shell is installed:
// scripts/install-deps.sh installs it), which must draw the loss curve and every stage of the
// plan and list the loss. Its screenshot (after the re-plan) is kept in
// build/artifacts/dashboard.png, with the DOM it showed beside it.

// Built only with LibTorch (the demo's nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "dashboard_support.hpp"
#include "run_command.hpp"

using namespace std::chrono;
using nlohmann::json;
using namespace sailor::testing;

namespace {

constexpr int iterations = 12;
constexpr int preempt_at = 5;

// Loads the page until the loss chart has at least `points` points and the plan grid shows
// every stage of the plan the API serves at that moment (bounded); returns the last DOM and,
// in `stages`, that plan's stage count.
std::string page_until(dashboard_client& web, const std::string& url, int points, int& stages,
                       const std::string& screenshot = "") {
  std::string dom;
  eventually(90s, [&] {
    auto plan = web.json("/api/plan");
    stages = plan.is_null() || !plan["plan"].is_object()
               ? -1
               : static_cast<int>(plan["plan"]["stages"].size());
    dom = chromium_dom(url, 3000);
    auto shown = dom_attribute(dom, "loss-chart", "data-points");
    auto rows = dom_attribute(dom, "plan-grid", "data-stages");
    return !shown.empty() && std::stoi(shown) >= points && rows == std::to_string(stages);
  });
  if (!screenshot.empty())
    chromium_dom(url, 3000, screenshot);
  return dom;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("dashboard: during a demo with a killed node, the API and the page show the "
          "training, the re-plan and the trace") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  child demo{{sailor_bin(), "demo", "--model", configs + "/models/tiny.yaml", "--job",
              configs + "/jobs/tiny.yaml", "--nodes", "3", "--zones", "2", "--iterations",
              std::to_string(iterations), "--preempt-at", std::to_string(preempt_at),
              "--dashboard", "127.0.0.1:0", "--dashboard-hold", "120"},
             dir.path("demo.out"), dir.path("demo.err")};
  const int port = dashboard_port(demo, 20s);
  INFO(demo.out());
  INFO(demo.err());
  REQUIRE(port > 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  dashboard_client web{port};
  const bool browser = !chromium_binary().empty();
  if (!browser)
    MESSAGE("chromium-headless-shell is not installed: the page is not loaded in a browser "
            "(scripts/install-deps.sh installs it)");

  // While training runs: the page shows the first points and every stage of the plan.
  json plan;
  REQUIRE(eventually(120s, [&] {
    auto m = web.json("/api/metrics?since=0");
    plan = web.json("/api/plan");
    return running(demo) && !m.is_null() && !m["points"].empty() && plan["plan"].is_object();
  }));
  REQUIRE(running(demo));
  const auto artifacts = std::filesystem::path{SAILOR_BIN_DIR}.parent_path() / "artifacts";
  std::filesystem::create_directories(artifacts);
  if (browser) {
    int stages = 0;
    auto dom = page_until(web, url, 1, stages);
    REQUIRE(stages > 0);
    CHECK(dom_attribute(dom, "plan-grid", "data-stages") == std::to_string(stages));
    CHECK(count_of(dom, "data-stage=\"") == stages);
    CHECK(std::stoi("0" + dom_attribute(dom, "loss-chart", "data-points")) >= 1);
  }

  // Training ends (the demo then holds the dashboard): the whole curve, resumed after the loss.
  json metrics;
  REQUIRE(eventually(240s, [&] {
    metrics = web.json("/api/metrics?since=0");
    return !running(demo) || (!metrics.is_null() && metrics["newest"] == iterations - 1);
  }));
  REQUIRE(running(demo));
  auto& points = metrics["points"];
  REQUIRE(points.size() == iterations);
  for (int k = 0; k < iterations; ++k) {
    CHECK(points[k]["iteration"] == k);
    CHECK(points[k]["measured_s"].get<double>() > 0);
    CHECK(points[k]["predicted_s"].get<double>() > 0);
    CHECK(points[k]["tokens_per_s"].get<double>() > 0);
  }
  CHECK(points.back()["loss"].get<double>() < points.front()["loss"].get<double>());
  CHECK(points.back()["plan_version"].get<int>() >= 2);
  // Marks: plan v1 from the start, and the plan after the loss where it resumed.
  auto& replans = metrics["replans"];
  REQUIRE(replans.size() >= 2);
  CHECK(replans[0]["first_iteration"] == 0);
  auto& resumed = replans.back();
  CHECK(resumed["first_iteration"].get<int>() <= preempt_at + 1);
  CHECK(resumed["reason"].get<std::string>().find("lost") != std::string::npos);
  CHECK(resumed["recovery_s"].get<double>() > 0);
  // The since= query returns the tail.
  auto tail = web.json("/api/metrics?since=" + std::to_string(iterations - 2));
  CHECK(tail["points"].size() == 2);

  // The loss and the re-plan in the event list.
  auto events = web.json("/api/events");
  bool lost = false, replanned = false;
  for (auto& e : events["events"]) {
    lost = lost || (e["kind"] == "lost" && e["node"] == "node-2");
    if (e["kind"] == "plan" && e["plan_version"].get<int>() >= 2) {
      replanned = true;
      CHECK(e["recovery_s"].get<double>() > 0);
    }
  }
  CHECK(lost);
  CHECK(replanned);

  // The trace: every rank of the newest plan, its iterations and measured phases.
  auto trace = web.json("/api/trace");
  int iteration_spans = 0, compute_spans = 0, stage_names = 0;
  for (auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "iteration") {
      ++iteration_spans;
      CHECK(e["dur"].get<double>() > 0);
    }
    compute_spans += e["ph"] == "X" && e["name"] == "compute" ? 1 : 0;
    stage_names += e["ph"] == "M" && e["name"] == "process_name" ? 1 : 0;
  }
  CHECK(iteration_spans > 0);
  CHECK(compute_spans == iteration_spans);
  CHECK(stage_names >= 1);

  if (browser) {
    // The page after the loss: all the points, every stage of the new plan, the loss listed.
    int stages = 0;
    const auto shot = (artifacts / "dashboard.png").string();
    std::filesystem::remove(shot);
    auto dom = page_until(web, url, iterations, stages, shot);
    std::ofstream{artifacts / "dashboard.html"} << dom;
    CHECK(dom_attribute(dom, "loss-chart", "data-points") == std::to_string(iterations));
    CHECK(dom_attribute(dom, "plan-grid", "data-stages") == std::to_string(stages));
    CHECK(dom.find("data-kind=\"lost\"") != std::string::npos);
    CHECK(dom.find("class=\"replan\"") != std::string::npos);
    CHECK(std::filesystem::file_size(shot) > 10000);
    MESSAGE("screenshot: " << shot);
  }

  demo.signal(SIGTERM);  // ends the hold
  CHECK(demo.wait_exit(30s) == 0);
}

#endif
