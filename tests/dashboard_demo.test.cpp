// The dashboard during `sailor demo` with a node preempted mid-training (SIGTERM: the node
// sends a preemption notice and leaves): the API's loss curve, measured and predicted times,
// the re-plan with its recovery time, the trace of the ranks' phases; and the page in
// headless Chromium (chromium-headless-shell, which scripts/install-deps.sh installs), which
// must draw the loss curve and every stage of the plan and list the preemption. Its
// screenshot (after the re-plan) is kept in build/artifacts/dashboard.png, with the DOM it
// showed beside it. Without Chromium the test fails, unless SAILOR_SKIP_BROWSER=1: then the
// API checks run and the test reports a skip.

// Built only with LibTorch (the demo's nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "dashboard_support.hpp"
#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_dashboard_demo {

using namespace std::chrono;
using nlohmann::json;
using namespace sailor::testing;

namespace {

constexpr int iterations = 24;
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

// The pid of the child of `parent` started with `--name NAME`; 0 when there is none.
int child_named(int parent, const std::string& name) {
  std::error_code ec;
  const std::string wanted = std::string{"--name"} + '\0' + name + '\0';
  for (std::filesystem::directory_iterator p{"/proc", ec}, end; !ec && p != end;
       p.increment(ec)) {
    const auto pid = p->path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat{p->path() / "stat"};
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');  // after the command name, which may hold spaces
    if (close == std::string::npos)
      continue;
    std::istringstream rest{line.substr(close + 1)};
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    std::ifstream cmd{p->path() / "cmdline"};
    const std::string args{std::istreambuf_iterator<char>{cmd}, {}};
    if (ppid == parent && args.find(wanted) != std::string::npos)
      return std::stoi(pid);
  }
  return 0;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}


// The whole loss curve after training ended, resumed after the loss: every point measured and
// predicted, the plan after the notice marked as a re-plan with its recovery time.
void check_curve(dashboard_client& web, json& metrics, std::int64_t newest_at_notice) {
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
  CHECK(resumed["first_iteration"].get<std::int64_t>() <= newest_at_notice + 2);
  CHECK(resumed["reason"].get<std::string>().find("lost") != std::string::npos);
  CHECK(resumed["recovery_s"].get<double>() > 0);
  // The since= query returns the tail.
  auto tail = web.json("/api/metrics?since=" + std::to_string(iterations - 2));
  CHECK(tail["points"].size() == 2);
}

// The newest iterations split by phase: every phase there and not negative, the medians over
// the newest 20 iterations of the curve less each plan's first, their whole the median of
// those iterations' measured time, and the phases adding up to about it (medians of the
// phases need not add up to the median of their sums exactly).
void check_phases(const json& metrics) {
  const auto& phases = metrics["phases_s"];
  INFO(phases.dump());
  std::set<std::int64_t> firsts;
  for (const auto& m : metrics["replans"])
    firsts.insert(m["first_iteration"].get<std::int64_t>());
  std::vector<double> measured;
  for (const auto& p : metrics["points"]) {
    const auto k = p["iteration"].get<std::int64_t>();
    if (k > iterations - 1 - 20 && !firsts.count(k))
      measured.push_back(p["measured_s"].get<double>());
  }
  std::sort(measured.begin(), measured.end());
  REQUIRE(!measured.empty());
  const std::size_t n = measured.size();
  const double median = n % 2 ? measured[n / 2] : (measured[n / 2 - 1] + measured[n / 2]) / 2;
  CHECK(phases["iterations"] == n);
  CHECK(phases["iteration"].get<double>() == doctest::Approx(median));
  double sum = 0;
  for (const char* name : {"data", "forward_backward", "send_wait", "recv_wait", "all_reduce",
                           "optimizer", "checkpoint", "bookkeeping"}) {
    INFO(name);
    REQUIRE(phases.contains(name));
    CHECK(phases[name].get<double>() >= 0);
    sum += phases[name].get<double>();
  }
  CHECK(phases["forward_backward"].get<double>() > 0);
  CHECK(sum == doctest::Approx(median).epsilon(0.2));
  MESSAGE("phases of the newest iterations (median s): " << phases.dump());
}

// The preemption and the re-plan in the event list.
void check_events(dashboard_client& web) {
  auto events = web.json("/api/events");
  bool preempted = false, replanned = false;
  for (auto& e : events["events"]) {
    preempted = preempted || (e["kind"] == "preempted" && e["node"] == "node-2");
    if (e["kind"] == "plan" && e["plan_version"].get<int>() >= 2) {
      replanned = true;
      CHECK(e["recovery_s"].get<double>() > 0);
    }
  }
  CHECK(preempted);
  CHECK(replanned);
}

// /metrics counts the re-plan after the preemption by its cause, and the recovery.
void check_prometheus(dashboard_client& web) {
  auto r = web.get("/metrics");
  CHECK(r.status == 200);
  INFO(r.body);
  CHECK(std::regex_search(r.body, std::regex{"\nsailor_replans_total\\{cause=\"node_lost\"\\} 1\n"}));
  CHECK(std::regex_search(r.body, std::regex{"\nsailor_recoveries_total\\{cause=\"loss\"\\} 1\n"}));
  CHECK(std::regex_search(r.body, std::regex{"\nsailor_last_recovery_seconds [0-9]"}));
  CHECK(std::regex_search(r.body, std::regex{"\nsailor_iterations_completed_total " +
                                             std::to_string(iterations) + "\n"}));
}

// The trace: every rank of the newest plan, its iterations and measured phases.
void check_trace(dashboard_client& web) {
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
}

// The page after the preemption: all the points, every stage of the new plan, the preemption
// listed as such, the zones as boxes with their nodes and states, and the link. Its screenshot
// and DOM are kept in `artifacts`.
void check_final_page(dashboard_client& web, const std::string& url,
                      const std::filesystem::path& artifacts) {
  int stages = 0;
  const auto shot = (artifacts / "dashboard.png").string();
  std::filesystem::remove(shot);
  auto dom = page_until(web, url, iterations, stages, shot);
  std::ofstream{artifacts / "dashboard.html"} << dom;
  CHECK(dom_attribute(dom, "loss-chart", "data-points") == std::to_string(iterations));
  CHECK(dom_attribute(dom, "plan-grid", "data-stages") == std::to_string(stages));
  CHECK(std::regex_search(dom, std::regex{"data-kind=\"preempted\"><td>[^<]*</td>"
                                           "<td>preempted</td><td>node-2</td>"}));
  CHECK(dom.find("class=\"replan\"") != std::string::npos);
  // The phase table: a row per phase, over the iterations the API's split is over.
  const auto phases = web.json("/api/metrics?since=0")["phases_s"];
  CHECK(dom_attribute(dom, "phases", "data-iterations") == phases["iterations"].dump());
  CHECK(count_of(dom, "data-phase=\"") == 8);
  CHECK(count_of(dom, "class=\"zone\" data-zone=\"") == 2);
  CHECK(dom.find("class=\"node preempted state-preempted\" data-node=\"node-2\"") !=
        std::string::npos);
  for (const char* survivor : {"node-0", "node-1"})
    CHECK(std::regex_search(dom, std::regex{std::string{"class=\"node state-[a-z]+\" "
                                                        "data-node=\""} + survivor + "\""}));
  CHECK(std::regex_search(dom, std::regex{"<li>[^<]+ \u21c4 [^<]+: [0-9.]+ ms, [0-9.]+ GB/s, "
                                          "egress \\$[0-9.]+/GB</li>"}));
  CHECK(std::filesystem::file_size(shot) > 10000);
  MESSAGE("screenshot: " << shot);
}

}  // namespace

TEST_CASE("dashboard: during a demo with a preempted node, the API and the page show the "
          "training, the preemption, the re-plan and the trace") {
  const bool browser = require_browser();
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  dashboard_child demo{demo_with_dashboard_argv({"--model", configs + "/models/tiny.yaml", "--job",
                                                 configs + "/jobs/tiny.yaml", "--nodes", "3", "--zones",
                                                 "2", "--iterations", std::to_string(iterations)},
                                                120),
                       dir, "demo", 20s};
  INFO(demo.output());
  const int port = demo.web_port;
  REQUIRE(port > 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  dashboard_client web{port};

  // The spot preemption with notice, mid-training: node-2 gets SIGTERM, tells the coordinator
  // it is preempted and leaves; the others re-plan and resume from the last checkpoint.
  // Iterations take a fraction of a second: the notice goes out from this polling loop.
  std::int64_t newest_at_notice = -1;
  REQUIRE(eventually(120s, [&] {
    auto m = web.json("/api/metrics?since=0");
    newest_at_notice = m.is_null() ? -1 : m["newest"].get<std::int64_t>();
    return !running(demo) || newest_at_notice >= preempt_at - 1;
  }));
  REQUIRE(newest_at_notice < iterations - 1);  // training still runs
  const int node = child_named(demo.pid(), "node-2");
  REQUIRE(node > 0);
  REQUIRE(::kill(node, SIGTERM) == 0);

  // While the demo runs (re-planning or training): the page shows the first points and every
  // stage of the plan it then serves.
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
  check_curve(web, metrics, newest_at_notice);
  check_phases(metrics);
  check_events(web);
  check_prometheus(web);
  check_trace(web);

  if (browser)
    check_final_page(web, url, artifacts);

  demo.signal(SIGTERM);  // ends the hold
  CHECK(demo.wait_exit(30s) == 0);
  if (!browser)
    end_as_skipped("the page in a browser");
}

}  // namespace integration_dashboard_demo
#endif
