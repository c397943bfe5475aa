// The re-plan around a straggler (issue 14), at the level of the drift decision with the real
// search and simulator: drift_watch (apps/sailor/drift_watch.hpp) asks plan_and_predict
// (apps/sailor/local_planning.hpp) what to run when one of two nodes sharing a 2-core host
// computes three times slower. The profile is the tiny model's as `sailor demo` measured it on
// that host; whether the plan without the slow node wins depends on the host model (a pass's
// CPU work with one process alone against two at once), not on the slow node alone.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../apps/sailor/drift_watch.hpp"
#include "../apps/sailor/live_planning.hpp"
#include "../apps/sailor/local_planning.hpp"
#include "rank_reports.hpp"
#include "sailor/config/load.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_drift_straggler {

using namespace sailor;

namespace {

// `sailor demo`'s model (configs/models/char-fortunes.yaml) on the CPU at micro-batch 1 as two
// processes measured it at once on the 2-core machine (`sailor demo --nodes 2`, Nov 2026): per
// layer (embedding, 4 blocks, head) forward, backward and update CPU seconds; and the host: the
// cores the two got together, the CPU of a message and of a gradient all-reduce.
app::measured_profile measured_by_two(std::map<int, double> host_model) {
  app::measured_profile m;
  m.profile.model = "char-gpt-4x64";
  config::gpu_profile cpu;
  cpu.gpu_type = "CPU";
  const config::layer_time block{362.9e-6, 571.7e-6, 107.7e-6};
  cpu.times[1][1] = {{20.4e-6, 35.9e-6, 29.5e-6}, block, block, block, block, {63.2e-6, 83.2e-6, 32.6e-6}};
  m.profile.by_gpu["CPU"] = cpu;
  m.host_cores = 1.9;
  m.cpu_per_message_s = 315e-6;
  m.cpu_per_collective_s = 1227e-6;
  m.ranks = 2;
  m.cpu_work_by_ranks = std::move(host_model);
  return m;
}

app::local_planning_inputs planning_on(const app::measured_profile& profile,
                                       std::shared_ptr<app::live_loop> loop) {
  app::local_planning_inputs in;
  auto base = config::load_cluster(SAILOR_SOURCE_DIR "/configs/clusters/local-2-zones.yaml");
  auto model = config::load_model(SAILOR_SOURCE_DIR "/configs/models/char-fortunes.yaml");
  auto job = config::load_job(SAILOR_SOURCE_DIR "/configs/jobs/fortunes-char.yaml");
  REQUIRE(base);
  REQUIRE(model);
  REQUIRE(job);
  in.cluster = *base;
  in.cluster.zones.resize(1);  // both nodes in local-a
  in.cluster.zones[0].gpus["CPU"] = 2;
  in.cluster.regions = {{"local", {"local-a"}}};
  in.cluster.links.clear();
  in.model = *model;
  in.job = *job;
  in.loop = std::move(loop);
  in.profile_source = [profile](const actors::plan_request&, const config::plan&, bool) {
    return result<app::measured_profile>{profile};
  };
  return in;
}

std::vector<actors::node_inventory> two_nodes() {
  std::vector<actors::node_inventory> out(2);
  for (int k = 0; k < 2; ++k) {
    out[k].name = "node-" + std::to_string(k);
    out[k].zone = "local-a";
    out[k].gpu_type = "CPU";
    out[k].devices.push_back({0, "cpu", 0});
  }
  return out;
}

// Two pipeline stages, one per node: what the search ran on this host before it had a host
// model (the plan the straggler scenario starts with).
config::plan two_stages(const config::model_shape& model, const config::job& job) {
  config::plan p;
  p.micro_batch = 1;
  p.global_batch = job.global_batch;
  const int layers = model.num_all_layers();
  for (int s = 0; s < 2; ++s) {
    config::replica r;
    r.gpu_type = "CPU";
    r.zone = "local-a";
    r.tp = 1;
    r.nodes = {"node-" + std::to_string(s)};
    r.devices = {0};
    p.stages.push_back({s == 0 ? 0 : layers / 2, s == 0 ? layers / 2 : layers - layers / 2, false, {r}});
  }
  return p;
}

// Runs the two-stage plan of a 400-iteration job; node-0 computes `slowdown` times slower from
// iteration 5 (and the iterations take as much longer). Returns the first re-plan's reason.
std::optional<std::string> straggle(const app::measured_profile& profile, double slowdown,
                                    std::shared_ptr<app::live_loop> loop = std::make_shared<app::live_loop>()) {
  loop->plan_start_iteration = 0;
  auto in = planning_on(profile, loop);
  const auto current = two_stages(in.model, in.job);
  auto fixed = in;
  fixed.fixed = current;
  actors::plan_request start;
  start.nodes = two_nodes();
  auto running = app::plan_and_predict(fixed, start, false);
  REQUIRE(running);
  running->prediction.planner = "search";  // as the search's plan: it may be re-planned
  REQUIRE(running->prediction.stages.size() == 2);
  app::drift_watch watch{[in](const actors::plan_request& r) { return app::plan_and_predict(in, r, true); },
                         loop, two_nodes()};
  std::vector<actors::iteration_record> records;
  for (int i = 1; i <= 20; ++i) {
    const double slow = i >= 5 ? slowdown : 1.0;
    std::vector<actors::board_rank_report> reports;
    for (int stage = 0; stage < 2; ++stage)
      reports.push_back(testing::rank_report(
        "node-" + std::to_string(stage), stage, stage, i,
        running->prediction.stages[static_cast<std::size_t>(stage)].compute_s * (stage == 0 ? slow : 1.0)));
    actors::iteration_record r;
    r.iteration = i;
    r.measured_s = running->prediction.uncorrected_s * slow;
    records.push_back(r);
    if (auto why = watch.check(reports, running->prediction, 1, records, 400 - i, {}, current))
      return why;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("drift: a straggler is left out when one process alone computes faster than two sharing the host") {
  // Node-0 computes twice as slow. One process alone does a pass in 0.65 of the CPU time two
  // at once take (cpu_work_by_ranks): the other node alone beats any share of the slow one.
  const auto why = straggle(measured_by_two({{1, 0.65}, {2, 1.0}}), 2);
  REQUIRE(why);
  INFO(*why);
  CHECK(why->find("node-0 computes") != std::string::npos);
  CHECK(why->find("without it") != std::string::npos);
}

TEST_CASE("drift: a straggler left out comes back into the plan when the node that replaced it is lost") {
  // Issue 37, item 1: the job stuck with "no devices to plan over" while the left-out node
  // was joined and idle.
  const auto profile = measured_by_two({{1, 0.65}, {2, 1.0}});
  auto loop = std::make_shared<app::live_loop>();
  const auto why = straggle(profile, 2, loop);
  REQUIRE(why);
  REQUIRE(why->find("without it") != std::string::npos);
  REQUIRE(loop->excluded.count("node-0") == 1);
  // The plan without node-0 runs on node-1 alone; node-1 is lost.
  auto in = planning_on(profile, loop);
  actors::plan_request lost;
  lost.reason = "node node-1 lost";
  lost.nodes = {two_nodes()[0]};
  lost.has_current = true;
  lost.current = two_stages(in.model, in.job);
  lost.current.stages = {lost.current.stages[1]};
  lost.current.stages[0].first_layer = 0;
  lost.current.stages[0].num_layers = in.model.num_all_layers();
  auto replan = app::plan_and_predict(in, lost, false);
  REQUIRE_MESSAGE(replan, (replan ? "" : replan.error().to_string()));
  bool uses_node_0 = false;
  for (const auto& stage : replan->plan.stages)
    for (const auto& replica : stage.replicas)
      for (const auto& node : replica.nodes) uses_node_0 |= node == "node-0";
  CHECK(uses_node_0);
  CHECK(loop->excluded.empty());
  // Planned at the speed it was left out at: twice as slow as its type.
  REQUIRE(loop->slowed.count("node-0") == 1);
  CHECK(loop->slowed.at("node-0") == doctest::Approx(2.0).epsilon(0.2));
}

TEST_CASE("drift: the same straggler keeps a smaller share when one process alone is no faster than two") {
  // The same profile and straggler, but one process alone measured as fast as each of two (as
  // the search saw every count before it had a host model): the slow node's smaller share
  // beats the other node alone.
  const auto why = straggle(measured_by_two({{1, 1.0}, {2, 1.0}}), 2);
  REQUIRE(why);
  INFO(*why);
  CHECK(why->find("keeping it with a smaller share") != std::string::npos);
}

}  // namespace integration_drift_straggler
