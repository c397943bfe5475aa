// The closed loop end to end (issue 14): `sailor demo --straggler-at K` slows the node the plan
// runs on (sailor-node --slowdown-file and SIGUSR2) after K iterations; the job must notice it
// from the ranks' telemetry, re-plan around it, and get its throughput back. And a profiler
// that fails leaves the search planning on the catalog, with a warning naming what is missing.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_closed_loop {

using namespace std::chrono_literals;
using namespace sailor::testing;

TEST_CASE("sailor demo notices a straggler from telemetry and re-plans around it") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  auto [r, j] = run_with_summary(sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --model " +
                                   configs + "/models/tiny.yaml --nodes 2 --zones 1 --iterations 40 " +
                                   "--straggler-at 4 --straggler-slowdown 8 --no-dashboard",
                                 dir, 120);
  CHECK(j["iterations_completed"].get<int>() == 40);
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

TEST_CASE("sailor demo: a link slowed at run time moves its zone pair's correction, and the job says why it does not re-plan") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  // One stage of two replicas, one per zone: the gradient all-reduce crosses the link (the
  // search, on this model, keeps to one zone).
  const auto plan = dir.write("plan.yaml",
                              "micro_batch: 1\nglobal_batch: 8\nstages:\n"
                              "  - layers: {first: 0, count: 6}\n    replicas:\n"
                              "      - {gpu: CPU, zone: local-a, tp: 1}\n"
                              "      - {gpu: CPU, zone: local-b, tp: 1}\n");
  // 2 ms, 100 MB/s (the cluster's) to 30 ms, 10 MB/s after 3 iterations: each of the
  // all-reduce's crossings of the ~0.9 MB of gradients then takes 0.1 s or more.
  auto [r, j] = run_with_summary(sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --model " +
                                   configs + "/models/tiny.yaml --nodes 2 --zones 2 --iterations 11 " +
                                   "--plan " + plan + " --link-change-at 3 --link-change local-a:local-b=30,10 " +
                                   "--profile-cache " + dir.path("profiles") + " --no-dashboard",
                                 dir, 120);
  CHECK(r.out.find("link local-a <-> local-b changed to 30.0 ms, 10 MB/s in 2 nodes") != std::string::npos);
  CHECK(j["iterations_completed"].get<int>() == 11);
  CHECK(j["link_change_at"].get<int>() == 3);
  // The link's correction: its all-reduce measured against the plan's prediction. The shaper
  // never releases early, so load can only push it further up.
  REQUIRE(j["link_factors"].contains("local-a<->local-b"));
  CHECK(j["link_factors"]["local-a<->local-b"].get<double>() > 4);
  // A fixed plan is not re-planned; the job says so, with the search's answer on the
  // corrected link.
  CHECK(j["replans"].get<int>() == 0);
  bool why_not = false;
  for (const auto& note : j["loop_notes"]) {
    const auto text = note.get<std::string>();
    why_not = why_not || (text.find("not re-planning: link local-a<->local-b") != std::string::npos &&
                          text.find("the plan is fixed") != std::string::npos &&
                          text.find("predicted gain") != std::string::npos);
  }
  CHECK(why_not);
}

TEST_CASE("sailor demo refuses a bad link change, naming the option, before starting anything") {
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  const std::string base = sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --model " +
                           configs + "/models/tiny.yaml --nodes 2 --zones 2 --iterations 6 --no-dashboard ";
  auto zone = run_command(base + "--link-change-at 2 --link-change local-a:local-z=30,5", 30);
  CHECK(zone.exit_code == 2);
  CHECK(zone.err.find("--link-change") != std::string::npos);
  CHECK(zone.err.find("no zone 'local-z'") != std::string::npos);
  auto alone = run_command(base + "--link-change local-a:local-b=30,5", 30);
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--link-change-at") != std::string::npos);
}

TEST_CASE("sailor demo plans on the catalog when profiling fails, and says what is missing") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  // A sailor-node whose profiler fails (as one whose device died while profiling would).
  const auto node = dir.write("node.sh", "#!/bin/sh\nif [ \"$1\" = profile ]; then echo "
                                         "'emulated profiler failure' >&2; exit 1; fi\nexec " +
                                           sailor_bin("sailor-node") + " \"$@\"\n");
  std::filesystem::permissions(node, std::filesystem::perms::owner_all);
  auto [r, j] = run_with_summary(sailor_bin() + " demo --job " + configs + "/jobs/tiny.yaml --model " +
                                   configs + "/models/tiny.yaml --nodes 2 --zones 2 --iterations 3 " +
                                   "--node-binary " + node + " --no-dashboard",
                                 dir, 90);
  CHECK(r.err.find("warning: no profile of CPU for model tiny-gpt") != std::string::npos);
  CHECK(r.err.find("emulated profiler failure") != std::string::npos);
  CHECK(j["iterations_completed"].get<int>() == 3);
  CHECK(j["planner"] == "search");
  CHECK(j["prediction_note"].get<std::string>().find("profiling failed") != std::string::npos);
  CHECK(j["predicted_iteration_s"].get<double>() > 0);  // the catalog's analytic estimate
}

TEST_CASE("sailor coordinator probes its zone link, plans with the search, predicts its iterations, and re-plans around a straggler") {
  temp_dir dir;
  const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  const auto summary = dir.path("summary.json");
  // No --planner: the search, on the model's profile measured on this machine.
  child coordinator{{sailor_bin(), "coordinator", "--listen", "127.0.0.1:0", "--cluster",
                     configs + "/clusters/local-2-zones.yaml", "--model",
                     configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml",
                     "--quorum", "2", "--settle-s", "30", "--transport", "tcp", "--token-file",
                     job_token_file(dir), "--train-dir",
                     dir.path("train"), "--iterations", "24", "--emulate-links",
                     "--profile-cache", dir.path("profiles"), "--summary-json", summary},
                    dir.path("coordinator.out"), dir.path("coordinator.err")};
  std::smatch m;
  static const std::regex listening{R"(listening on 127\.0\.0\.1:([0-9]+))"};
  std::string out;
  REQUIRE(eventually(10s, [&] {
    out = coordinator.out();
    return std::regex_search(out, m, listening);
  }));
  const std::string port = m[1];
  std::vector<std::unique_ptr<child>> nodes;
  for (int k = 0; k < 2; ++k) {
    const std::string name = "node-" + std::to_string(k);
    nodes.push_back(std::make_unique<child>(
      std::vector<std::string>{sailor_bin("sailor-node"), "--join", "127.0.0.1:" + port, "--zone",
                               k == 0 ? "local-a" : "local-b", "--devices", "cpu:1", "--name",
                               name, "--transport", "tcp", "--token-file", job_token_file(dir),
                               "--state-dir", dir.path(name), "--slowdown-file",
                               dir.path(name + ".slowdown")},
      dir.path(name + ".out"), dir.path(name + ".err")));
  }
  // After 4 iterations the first node of the plan computes 8 times slower (as the demo's
  // --straggler-at does): the coordinator must notice it from the ranks' reports.
  static const std::regex first_node{R"(plan v1: [^\n]*\n  stage 0: [^\[]*\[CPU@local-[ab] tp[0-9]+ node-([01])/)"};
  const bool started = eventually(90s, [&] {
    out = coordinator.out();
    return out.find("iteration 4/24") != std::string::npos && std::regex_search(out, m, first_node);
  });
  INFO(out);
  INFO(coordinator.err());
  REQUIRE(started);
  const int slow = std::stoi(m[1]);
  const std::string slow_name = "node-" + std::to_string(slow);
  dir.write(slow_name + ".slowdown", "8\n");
  nodes[static_cast<std::size_t>(slow)]->signal(SIGUSR2);
  const bool finished = eventually(120s, [&] {
    return coordinator.out().find("training finished") != std::string::npos;
  });
  out = coordinator.out();
  INFO(out);
  INFO(coordinator.err());
  REQUIRE(finished);
  // `sailor status` says what was predicted and what was measured, and why the job re-planned.
  auto st = run_command(sailor_bin() + " status 127.0.0.1:" + port +
                          " --transport tcp --token-file " + job_token_file(dir) + " --timeout-ms 30000", 60);
  INFO(st.out);
  CHECK(st.exit_code == 0);
  CHECK(std::regex_search(st.out, std::regex{"predicted [0-9.]+ s per iteration, measured "
                                             "[0-9.]+ s \\(measured/predicted [0-9.]+\\)"}));
  CHECK(st.out.find("re-planning on drift: " + slow_name + " computes") != std::string::npos);
  coordinator.signal(SIGTERM);
  REQUIRE(coordinator.wait_exit(30s) == 0);
  // The search's plan carries its prediction (the even split has none); the profile measured
  // here was cached.
  CHECK(std::regex_search(coordinator.out(),
                          std::regex{"plan v1: predicted [0-9.]+ s per iteration"}));
  CHECK(!std::filesystem::is_empty(dir.path("profiles")));
  // The emulated link between the nodes' zones was probed before planning (2 ms, 100 MB/s in
  // local-2-zones.yaml): the shaper never delivers early, so the probe reads at least its
  // latency and no more than its bandwidth.
  static const std::regex probed{R"(\[link local-a->local-b\] probed in [0-9.]+ s: latency ([0-9.]+) ms, ([0-9.]+) MB/s)"};
  REQUIRE(std::regex_search(out, m, probed));
  CHECK(std::stod(m[1]) >= 1.5);
  CHECK(std::stod(m[2]) <= 120);
  // One re-plan for the drift, naming the slow node and the predicted gain; the next plan
  // runs the rest.
  static const std::regex why{"re-planning on drift: (node-[01]) computes [0-9.]+x slower[^\n]*"
                              "predicted gain \\+[0-9]+%"};
  REQUIRE(std::regex_search(out, m, why));
  CHECK(m[1] == slow_name);
  CHECK(out.find("re-planning on drift", static_cast<std::size_t>(m.position(0)) + 1) ==
        std::string::npos);
  CHECK(out.find("plan v2:") != std::string::npos);
  auto j = read_json(summary);
  CHECK(j["iterations_completed"].get<int>() == 24);
  CHECK(j["predicted_iteration_s"].get<double>() > 0);
}

}  // namespace integration_closed_loop
