// The coordinator's web dashboard, from outside: its JSON API against a real coordinator with
// sailor-node processes (the fields a page or a script reads, errors for bad requests, a
// preemption in the event list), and the page's validation-loss line in headless Chromium,
// fed fixed metrics (the nodes do not report a validation loss yet). The demo's training, as
// the API and the page show it, is in dashboard_demo.test.cpp.
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dashboard_support.hpp"
#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_dashboard {

using namespace std::chrono;
using nlohmann::json;
using namespace sailor::testing;

namespace {

const std::string configs = configs_dir();
// Long enough that a loaded machine (ctest -j, other builds) never loses a node to a late
// heartbeat: the preemption below is a notice, which needs no timeout to be seen.
constexpr int heartbeat_timeout_ms = 5000;

std::vector<std::string> dashboard_coordinator_argv(const temp_dir& dir, int quorum) {
  return coordinator_argv("127.0.0.1:0", {"--quorum", std::to_string(quorum), "--settle-s", "30", "--heartbeat-ms",
                                          "100", "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms), "--transport", "tcp",
                                          "--token-file", job_token_file(dir)});
}

std::unique_ptr<child> start_node(temp_dir& dir, int port, const std::string& name,
                                  const std::string& zone) {
  auto c = std::make_unique<child>(
    node_argv("127.0.0.1:" + std::to_string(port), name, zone, {"--token-file", job_token_file(dir)}),
    dir.path(name + ".out"), dir.path(name + ".err"));
  REQUIRE(c->pid() > 0);
  return c;
}

// The event of `kind` about `node` (or any node when empty); null when there is none.
json find_event(const json& events, const std::string& kind, const std::string& node = "") {
  for (const auto& e : events["events"])
    if (e["kind"] == kind && (node.empty() || e.value("node", "") == node))
      return e;
  return nullptr;
}

// Unknown paths, malformed or unknown query parameters and writes are refused with a reason.
void check_bad_requests(dashboard_client& web) {
  auto missing = web.get("/api/nothing");
  CHECK(missing.status == 404);
  CHECK(missing.json()["error"].get<std::string>().find("/api/nothing") != std::string::npos);
  CHECK(web.get("/index.php").status == 404);
  for (const char* bad : {"/api/metrics?since=abc", "/api/metrics?since=-1",
                          "/api/metrics?limit=0", "/api/metrics?since=1&colour=red",
                          "/api/events?x=1"}) {
    auto r = web.get(bad);
    INFO(bad);
    CHECK(r.status == 400);
    CHECK(!r.json()["error"].get<std::string>().empty());
  }
  CHECK(web.get("/api/metrics?since=abc").json()["error"].get<std::string>().find("since") !=
        std::string::npos);
  CHECK(web.post("/api/status").status == 405);

}

int coordinator_port(const child& c) {
  const std::string port = listening_port(c);
  return port.empty() ? 0 : std::stoi(port);
}

}  // namespace

TEST_CASE("dashboard: the JSON API of a coordinator with nodes, bad requests, and a "
          "preemption in the event list") {
  temp_dir dir;
  dashboard_child coordinator{dashboard_coordinator_argv(dir, 3), dir, "coordinator", 10s};
  INFO(coordinator.output());
  REQUIRE(coordinator.web_port > 0);
  const int port = coordinator_port(coordinator);
  REQUIRE(port > 0);
  dashboard_client web{coordinator.web_port};

  // Before any node: the page and an empty API.
  auto page = web.get("/");
  CHECK(page.status == 200);
  CHECK(page.content_type.find("text/html") == 0);
  CHECK(page.body.find("id=\"plan-grid\"") != std::string::npos);
  CHECK(page.body.find("src=\"/dashboard.js\"") != std::string::npos);
  CHECK(web.get("/dashboard.js").content_type.find("text/javascript") == 0);
  CHECK(web.get("/dashboard.css").status == 200);
  CHECK(web.json("/api/plan")["plan"].is_null());

  std::vector<std::unique_ptr<child>> nodes;
  nodes.push_back(start_node(dir, port, "n1", "local-a"));
  nodes.push_back(start_node(dir, port, "n2", "local-a"));
  nodes.push_back(start_node(dir, port, "n3", "local-b"));
  json status;
  REQUIRE(eventually(30s, [&] {
    status = web.json("/api/status");
    return !status.is_null() && status["all_roles_assigned"] == true &&
           status["nodes"].size() == 3;
  }));

  // /api/status is what `sailor status --json` prints.
  auto cli = run_command(sailor_bin() + " status 127.0.0.1:" + std::to_string(port) +
                           " --json --transport tcp --token-file " + job_token_file(dir) + " --timeout-ms 20000",
                         60);
  REQUIRE(cli.exit_code == 0);
  auto printed = json::parse(cli.out);
  std::set<std::string> api_keys, cli_keys;
  for (auto& [k, v] : status.items()) api_keys.insert(k);
  for (auto& [k, v] : printed.items()) cli_keys.insert(k);
  CHECK(api_keys == cli_keys);
  CHECK(status["plan_version"] == printed["plan_version"]);
  CHECK(status["plan"] == printed["plan"]);
  CHECK(status["zones"] == json::array({"local-a", "local-b"}));
  for (auto& n : status["nodes"]) {
    CHECK(n["state"] == "ready");
    CHECK(n["gpu_type"] == "CPU");
    CHECK(n["devices"] == 1);
    CHECK(n["heartbeat_age_ms"].get<int>() <= heartbeat_timeout_ms);
  }

  // /api/plan: every stage with its replicas, on the nodes that joined, priced.
  auto plan = web.json("/api/plan");
  REQUIRE(plan["plan"].is_object());
  CHECK(plan["plan_version"] == 1);
  CHECK(plan["plan"]["stages"].size() == status["stages"].get<std::size_t>());
  int devices = 0;
  for (auto& st : plan["plan"]["stages"])
    for (auto& r : st["replicas"]) {
      CHECK(r["gpu_type"] == "CPU");
      CHECK((r["zone"] == "local-a" || r["zone"] == "local-b"));
      CHECK(r["nodes"].size() == r["tp"].get<std::size_t>());
      devices += r["tp"].get<int>();
    }
  CHECK(plan["gpus"] == devices);
  CHECK(plan["usd_per_hour"].get<double>() == doctest::Approx(0.05 * devices));

  // /api/info: the zones, the link and where the dashboard listens.
  auto info = web.json("/api/info");
  CHECK(info["zones"].size() == 2);
  REQUIRE(info["links"].size() == 1);
  CHECK(info["links"][0]["latency_ms"].get<double>() == doctest::Approx(2));
  CHECK(info["links"][0]["egress_usd_per_gb"].get<double>() == doctest::Approx(0.01));
  CHECK(info["dashboard"]["loopback_only"] == true);

  // No training: an empty curve and trace.
  auto metrics = web.json("/api/metrics?since=0");
  CHECK(metrics["points"].empty());
  CHECK(metrics["newest"] == -1);
  CHECK(web.json("/api/trace")["traceEvents"].empty());

  // The events so far: three joins and plan v1 with its reason.
  auto events = web.json("/api/events");
  for (const char* n : {"n1", "n2", "n3"})
    CHECK(!find_event(events, "join", n).is_null());
  auto first = find_event(events, "plan");
  REQUIRE(!first.is_null());
  CHECK(first["plan_version"] == 1);
  CHECK(first["reason"].get<std::string>().find("quorum") != std::string::npos);

  check_bad_requests(web);

  // A preemption notice (SIGTERM) shows up as such, then the re-plan that followed it.
  nodes[2]->signal(SIGTERM);
  json after;
  REQUIRE(eventually(20s, [&] {
    after = web.json("/api/events");
    auto replan = find_event(after, "plan");
    for (auto& e : after["events"])
      if (e["kind"] == "plan" && e["plan_version"] == 2)
        replan = e;
    return !find_event(after, "preempted", "n3").is_null() && replan["plan_version"] == 2;
  }));
  for (auto& e : after["events"])
    if (e["kind"] == "plan" && e["plan_version"] == 2)
      CHECK(e["reason"].get<std::string>().find("n3") != std::string::npos);
  REQUIRE(eventually(20s, [&] {
    auto s = web.json("/api/status");
    return !s.is_null() && s["nodes"].size() == 2 && s["all_roles_assigned"] == true;
  }));
  CHECK(web.json("/api/plan")["plan_version"] == 2);
}

TEST_CASE("dashboard: an address other than loopback needs an explicit flag") {
  temp_dir dir;
  auto args = dashboard_coordinator_argv(dir, 1);
  std::string line;
  for (auto& a : args) line += a + " ";
  auto r = run_command(line + "--dashboard 0.0.0.0:0", 30);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--dashboard-allow-remote") != std::string::npos);
  auto bad = run_command(line + "--dashboard nonsense", 30);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--dashboard") != std::string::npos);
}

namespace {

// The page as served, its script inlined after a stand-in for fetch() that answers the API
// from `fixtures` (path -> JSON; "/api/metrics" for since=0, "/api/metrics tail" for later).
std::string page_with_fixtures(dashboard_client& web, const json& fixtures) {
  auto html = web.get("/").body;
  const std::string tag = "<script src=\"/dashboard.js\"></script>";
  const auto at = html.find(tag);
  REQUIRE(at != std::string::npos);
  const std::string stub = R"(<script>
const fixtures = )" + fixtures.dump() + R"(;
window.fetch = async (path) => {
  const key = path.startsWith('/api/metrics') ? (path.endsWith('since=0') ? '/api/metrics'
    : '/api/metrics tail') : path;
  const body = fixtures[key];
  return { ok: body !== undefined, status: body === undefined ? 404 : 200, json: async () => body };
};
</script>)";
  return html.replace(at, tag.size(), stub + "<script>" + web.get("/dashboard.js").body + "</script>");
}

// Six iterations of a falling loss; `with_val` gives iterations 2 and 5 a validation loss.
json metrics_fixture(bool with_val) {
  json points = json::array();
  for (int k = 0; k < 6; ++k) {
    json p{{"iteration", k}, {"plan_version", 1}, {"unix_ms", 1700000000000 + 100 * k},
           {"loss", 5.0 - 0.2 * k}, {"measured_s", 0.1}, {"predicted_s", 0.12},
           {"compute_s", 0.08}, {"send_wait_s", 0}, {"recv_wait_s", 0}, {"all_reduce_s", 0.02},
           {"tokens", 128}, {"tokens_per_s", 1280}};
    if (with_val && (k == 2 || k == 5))
      p["val_loss"] = 5.1 - 0.2 * k;
    points.push_back(p);
  }
  json marks = json::array({{{"plan_version", 1}, {"first_iteration", 0},
                             {"unix_ms", 1700000000000}, {"reason", "quorum"}}});
  return {{"curve_id", 0}, {"newest", 5}, {"more", false}, {"points", points},
          {"replans", marks}};
}

// The cx of every <circle class="CLS"> in a DOM dump, in order.
std::vector<std::string> dot_xs(const std::string& dom, const std::string& cls) {
  std::vector<std::string> out;
  const std::regex dot{"<circle class=\"" + cls + "\" cx=\"([^\"]*)\""};
  for (std::sregex_iterator m{dom.begin(), dom.end(), dot}, end; m != end; ++m)
    out.push_back((*m)[1]);
  return out;
}

}  // namespace

TEST_CASE("dashboard page: the validation loss is drawn at the iterations that carry one "
          "(metrics points or the status's val_loss_curve), and nothing while none does") {
  if (!sailor::testing::require_browser())
    sailor::testing::end_as_skipped("the page's validation-loss line in a browser");
  temp_dir dir;
  dashboard_child coordinator{dashboard_coordinator_argv(dir, 1), dir, "coordinator", 10s};
  INFO(coordinator.output());
  REQUIRE(coordinator.web_port > 0);
  dashboard_client web{coordinator.web_port};
  json fixtures;
  for (const char* path : {"/api/info", "/api/status", "/api/plan", "/api/events"}) {
    fixtures[path] = web.json(path);
    REQUIRE(!fixtures[path].is_null());
  }
  const json status = fixtures["/api/status"];
  // Where the validation loss comes from: the metrics points (val_loss), the status's
  // training.val_loss_curve ([iterations completed, loss]: the same iterations 2 and 5), or
  // nowhere.
  for (const std::string source : {"points", "status", "none"}) {
    INFO("validation loss from: " << source);
    const bool with_val = source != "none";
    fixtures["/api/status"] = status;
    if (source == "status")
      fixtures["/api/status"]["training"] = {
        {"completed", 6}, {"total", 6}, {"loss", 4.0}, {"summary", "training: 6/6"},
        {"val_loss_curve", json::array({json::array({3, 4.7}), json::array({6, 4.1})})}};
    fixtures["/api/metrics"] = metrics_fixture(source == "points");
    fixtures["/api/metrics tail"] = metrics_fixture(false);
    fixtures["/api/metrics tail"]["points"] = json::array();
    const auto file = dir.path(source + ".html");
    std::ofstream{file} << page_with_fixtures(web, fixtures);
    const auto dom = sailor::testing::chromium_dom("file://" + file, 2000);
    using sailor::testing::dom_attribute;
    CHECK(dom_attribute(dom, "loss-chart", "data-points") == "6");
    CHECK(dom_attribute(dom, "loss-chart", "data-val-points") == (with_val ? "2" : "0"));
    // A validation dot at the x of the loss dots of iterations 2 and 5.
    const auto loss_x = dot_xs(dom, "dot-loss"), val_x = dot_xs(dom, "dot-val-loss");
    REQUIRE(loss_x.size() == 6);
    CHECK(val_x == (with_val ? std::vector<std::string>{loss_x[2], loss_x[5]}
                             : std::vector<std::string>{}));
    CHECK((dom.find("class=\"series-val-loss\"") != std::string::npos) == with_val);
  }
}

}  // namespace integration_dashboard
