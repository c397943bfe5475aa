// The job's figures off a status board the test fills as the supervisor would: Prometheus'
// text format (parsed strictly), the JSON line, and --metrics-jsonl's one line per iteration.
#include "job_metrics.hpp"

#include "exposition.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "sailor/config/load.hpp"

using namespace sailor;
using nlohmann::json;

namespace {

const std::string configs = SAILOR_SOURCE_DIR "/configs";

// The exposition as the shared parser reads it, which must end its last line.
sailor::testing::exposition parse(const std::string& text) {
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  return sailor::testing::parse_exposition(text);
}

actors::iteration_record iteration(std::int64_t k) {
  actors::iteration_record r;
  r.iteration = k;
  r.loss = 4.0 - 0.25 * static_cast<double>(k);
  r.measured_s = 0.5 + 0.125 * static_cast<double>(k);
  r.tokens = 1024;
  return r;
}

actors::node_status node(const std::string& name, const std::string& state) {
  actors::node_status n;
  n.inventory.name = name;
  n.state = state;
  return n;
}

// Two CPU nodes of the demo's two zones training `plan` (one replica of each stage in `zones`),
// a third joined; a re-plan after a loss, recovered in 2.5 s; 3 of 10 iterations done.
struct job_on_board {
  std::shared_ptr<actors::status_board> board = std::make_shared<actors::status_board>();
  config::cluster cluster;
  config::model_shape model;

  job_on_board(const std::vector<std::string>& zones) {
    auto c = config::load_cluster(configs + "/clusters/local-2-zones.yaml");
    auto m = config::load_model(configs + "/models/tiny.yaml");
    REQUIRE(c);
    REQUIRE(m);
    cluster = *c;
    model = *m;
    board->planning("quorum of 2 nodes reached");
    board->add_event("plan v1: 2 stages, 1 replicas, 2 roles", 0);
    board->add_event("node n3 lost: missed heartbeats", 1);
    board->planning("node n3 lost");
    board->add_event("plan v2: 2 stages, 1 replicas, 2 roles", 1);
    board->add_recovery("loss", 2.5);
    actors::board_snapshot s;
    s.status.plan_version = 2;
    s.status.training_total = 10;
    s.status.nodes = {node("n1", "ready"), node("n2", "ready"), node("n4", "joined")};
    s.status.checkpoint_every = 1;
    s.status.checkpoint_behind = 1;
    config::plan p;
    p.micro_batch = 1;
    p.global_batch = 4;
    const int layers = model.num_all_layers();
    for (std::size_t k = 0; k < zones.size(); ++k) {
      config::stage_plan st;
      st.first_layer = static_cast<int>(k) * layers / static_cast<int>(zones.size());
      st.num_layers = (static_cast<int>(k) + 1) * layers / static_cast<int>(zones.size()) -
                      st.first_layer;
      config::replica r;
      r.gpu_type = "CPU";
      r.zone = zones[k];
      r.tp = 1;
      st.replicas.push_back(r);
      p.stages.push_back(st);
    }
    s.plan = p;
    s.predicted_s = 0.4;
    for (int k = 0; k < 3; ++k) {
      board->add_iteration(iteration(k), 2, 0.4);
      s.status.training_completed = k + 1;
      board->publish(s);
    }
  }
};

}  // namespace

TEST_CASE("job metrics: /metrics gives the newest iteration, nodes by state, re-plans and "
          "recoveries by cause, the cross-zone estimate and the cost") {
  job_on_board job{{"local-a", "local-b"}};
  app::job_metrics metrics{job.board, job.cluster, job.model};
  const auto text = app::prometheus_text(metrics.figures());
  INFO(text);
  const auto m = parse(text);
  CHECK(m.types.at("sailor_iterations_completed_total") == "counter");
  CHECK(m.at("sailor_iterations_completed_total") == 3);
  CHECK(m.at("sailor_iterations_planned") == 10);
  CHECK(m.at("sailor_plan_version") == 2);
  CHECK(m.at("sailor_loss") == 3.5);
  CHECK(m.at("sailor_iteration_measured_seconds") == 0.75);
  CHECK(m.at("sailor_tokens_per_second") == doctest::Approx(1024 / 0.75));
  CHECK(m.at("sailor_iteration_predicted_seconds") == 0.4);
  CHECK(m.at("sailor_nodes{state=\"ready\"}") == 2);
  CHECK(m.at("sailor_nodes{state=\"joined\"}") == 1);
  CHECK(m.at("sailor_nodes{state=\"idle\"}") == 0);
  CHECK(m.types.at("sailor_replans_total") == "counter");
  CHECK(m.at("sailor_replans_total{cause=\"node_lost\"}") == 1);
  CHECK(m.samples.count("sailor_replans_total{cause=\"start\"}") == 0);  // the first plan
  CHECK(m.at("sailor_recoveries_total{cause=\"loss\"}") == 1);
  CHECK(m.at("sailor_last_recovery_seconds") == 2.5);
  CHECK(m.at("sailor_checkpoint_behind_iterations") == 1);
  // The two stages in two zones send activations across: bytes, and their egress in the cost
  // beside 2 CPUs at $0.05/h for 0.75 s.
  const double bytes = m.at("sailor_cross_zone_bytes_per_iteration");
  CHECK(bytes > 0);
  const double gpus_usd = 2 * 0.05 * 0.75 / 3600;
  CHECK(m.at("sailor_usd_per_iteration") == doctest::Approx(gpus_usd + bytes / 1e9 * 0.01));

  // The JSON line carries the same figures.
  const auto line = app::figures_json(metrics.figures());
  CHECK(line["iteration"] == 2);
  CHECK(line["iterations_completed"] == 3);
  CHECK(line["loss"] == 3.5);
  CHECK(line["nodes"]["ready"] == 2);
  CHECK(line["replans"]["node_lost"] == 1);
  CHECK(line["recoveries"]["loss"] == 1);
  CHECK(line["cross_zone_bytes_per_iteration"].get<double>() == bytes);
}

TEST_CASE("job metrics: a plan in one zone sends nothing across zones (and before any iteration "
          "the per-iteration figures are left out)") {
  job_on_board job{{"local-a", "local-a"}};
  app::job_metrics metrics{job.board, job.cluster, job.model};
  CHECK(parse(app::prometheus_text(metrics.figures()))
          .at("sailor_cross_zone_bytes_per_iteration") == 0);
  app::job_metrics empty{std::make_shared<actors::status_board>(), job.cluster, job.model};
  const auto m = parse(app::prometheus_text(empty.figures()));
  CHECK(m.at("sailor_iterations_completed_total") == 0);
  for (const char* absent : {"sailor_loss", "sailor_tokens_per_second",
                             "sailor_iteration_measured_seconds", "sailor_usd_per_iteration",
                             "sailor_cross_zone_bytes_per_iteration"})
    CHECK(m.samples.count(absent) == 0);
  CHECK(app::figures_json(empty.figures())["loss"].is_null());
}

TEST_CASE("job metrics: --metrics-jsonl appends one line per completed iteration after the "
          "supervisor's own callback, and names the file it cannot open") {
  job_on_board job{{"local-a", "local-b"}};
  const auto path = std::filesystem::temp_directory_path() /
                    ("sailor-metrics-" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  auto file = app::open_metrics_jsonl(path.string(), job.board, job.cluster, job.model);
  REQUIRE(file);
  actors::supervisor_options options;
  int told = 0;
  options.on_iteration = [&told](const actors::iteration_record&,
                                 const actors::training_progress&) { ++told; };
  app::append_figures_on_iteration(options, *file);
  actors::training_progress progress;
  for (int k = 3; k < 7; ++k) {
    job.board->add_iteration(iteration(k), 2, 0.4);
    options.on_iteration(iteration(k), progress);
  }
  CHECK(told == 4);
  std::ifstream in{path};
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(json::parse(line));
  REQUIRE(lines.size() == 4);
  for (int k = 0; k < 4; ++k) {
    CHECK(lines[k]["iteration"] == k + 3);
    CHECK(lines[k]["loss"] == iteration(k + 3).loss);
  }
  std::filesystem::remove(path);

  auto bad = app::open_metrics_jsonl("/no-such-folder/m.jsonl", job.board, job.cluster, job.model);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("--metrics-jsonl") != std::string::npos);
  CHECK(bad.error().message.find("/no-such-folder/m.jsonl") != std::string::npos);
  auto none = app::open_metrics_jsonl("", job.board, job.cluster, job.model);
  REQUIRE(none);
  CHECK(*none == nullptr);
}
