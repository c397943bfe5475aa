// `sailor replay --live`: short traces played on local nodes while the tiny model trains. A fall
// with notice stops a node and nothing is lost, a rise starts one, training goes on, and the
// GPU-hours and dollars are those the nodes ran; when every node is killed the job waits for
// capacity and trains again when it returns; a slice with no node at its start is refused;
// the restart_from_checkpoint baseline kills and restarts every node on every change.
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_replay_live {

using namespace sailor::testing;

namespace {

// A trace of the two V100 zones of configs/clusters/aws-v100-spot*.yaml, a tick a minute, in
// `dir`: `ticks` holds a line "tick,seconds,us-east-2b,us-west-2a" per tick.
std::string write_two_zone_trace(const temp_dir& dir, const std::string& ticks) {
  return dir.write("trace.csv", ",Timestamp,V100-16_us-east-2b,V100-16_us-west-2a\n" + ticks);
}

// `sailor replay --live` over `trace`, with `options` after it.
std::string live_replay(const std::string& trace, const std::string& options) {
  return sailor_bin() + " replay --live --trace " + trace + " " + options;
}

// The summary of `sailor replay --live` over `trace` on configs/clusters/`cluster`.yaml, a node
// per zone, 120 trace-seconds per second (7 ticks in 3.5 s, from the first iteration on).
nlohmann::json live_summary_on(const temp_dir& dir, const std::string& trace, const std::string& cluster) {
  const std::string cluster_file = configs_dir() + "/clusters/" + cluster + ".yaml";
  return run_with_summary(
           live_replay(trace, "--cluster " + cluster_file + " --nodes-per-zone 1 --time-scale 120 --stall-timeout 30"),
           dir, 90)
    .summary;
}

}  // namespace

TEST_CASE("sailor replay --live stops a node with notice on a fall and starts one on a rise") {
  temp_dir dir;
  // Two zones of one V100 each, a tick a minute: zone b falls at tick 2 and returns at tick 4.
  auto trace = write_two_zone_trace(dir,
                                   "0,0,1,1\n1,60,1,1\n2,120,1,0\n3,180,1,0\n4,240,1,1\n5,300,1,1\n6,360,1,1\n");
  auto j = live_summary_on(dir, trace, "aws-v100-spot");
  CHECK(j["nodes_started"]["initially"] == 2);
  CHECK(j["nodes_started"]["by_the_trace"] == 1);
  CHECK(j["nodes_stopped"]["with_notice"] == 1);
  CHECK(j["nodes_stopped"]["without_notice"] == 0);
  CHECK(j["nodes_stopped"]["exited_by_themselves"] == 0);
  REQUIRE(j["changes"].size() == 2);
  CHECK(j["changes"][0]["zone"] == "V100-16@us-west-2a");
  CHECK(j["changes"][0]["stopped"][0]["notice"] == true);
  CHECK(j["changes"][1]["started"].size() == 1);
  // Training went on after the preemption.
  CHECK(j["completed_iterations"].get<int>() > j["changes"][0]["iterations_done"].get<int>());
  CHECK(j["lost_iterations"] == 0);  // the only stop came with notice
  CHECK(j["replans"].get<int>() >= 1);
  // Recovering splits into the old plan training on through the notice and the job stopped.
  const auto& sec = j["seconds"];
  CHECK(sec["recovering"].get<double>() > 0);
  CHECK(sec["recovering_trained"].get<double>() >= 0);
  CHECK(sec["recovering_stopped"].get<double>() > 0);
  CHECK(sec["recovering_trained"].get<double>() + sec["recovering_stopped"].get<double>() ==
        doctest::Approx(sec["recovering"].get<double>()));
  // Zone a ran 7 ticks of 60 s, zone b 2 + 3 of them (measured in real time: some slack).
  const auto& hours = j["gpu_hours"];
  REQUIRE(hours.size() == 2);
  CHECK(hours[0]["gpu_hours"].get<double>() == doctest::Approx(7 * 60 / 3600.0).epsilon(0.15));
  CHECK(hours[1]["gpu_hours"].get<double>() == doctest::Approx(5 * 60 / 3600.0).epsilon(0.2));
  const double total = j["gpu_hours_total"].get<double>();
  CHECK(j["dollars"]["spot"].get<double>() == doctest::Approx(total * 0.918));
  CHECK(j["dollars"]["on_demand"].get<double>() == doctest::Approx(total * 3.06));
}

TEST_CASE("sailor replay --live waits for capacity when every node is killed, and trains again when it returns") {
  temp_dir dir;
  // Both zones fall at tick 2 without notice (--kill-fraction 1) and return at tick 4.
  auto trace = write_two_zone_trace(dir,
                                   "0,0,1,1\n1,60,1,1\n2,120,0,0\n3,180,0,0\n4,240,1,1\n5,300,1,1\n");
  // A slice without capacity at its start is refused, naming the option, the tick and the file.
  auto refused = run_command(live_replay(trace, "--from 2 --to 4"), 30);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--from") != std::string::npos);
  CHECK(refused.err.find("tick 2") != std::string::npos);
  CHECK(refused.err.find("trace.csv") != std::string::npos);
  auto [r, j] = run_with_summary(
    live_replay(trace, "--nodes-per-zone 1 --time-scale 120 --kill-fraction 1 --stall-timeout 30"), dir, 90);
  CHECK(r.out.find("every node is gone: waiting for capacity") != std::string::npos);
  CHECK(j["nodes_stopped"]["without_notice"] == 2);
  CHECK(j["nodes_started"]["by_the_trace"] == 2);
  CHECK(j["waits_for_capacity"] == 1);
  // Two ticks of 0.5 s without a node.
  CHECK(j["seconds"]["waiting_for_capacity"].get<double>() > 0.5);
  // Training went on once the nodes were back: the newest plan completed iterations after
  // the one it resumed from. The new nodes share nothing with the killed ones (a state folder
  // each): they resume from the coordinator's copy of the checkpoint (or, when one of them
  // joined first, from its ranks, which restored it; tests/checkpoint_keeper.test.cpp checks
  // the copy itself), and what is run again is counted, never more than had been done.
  INFO(j.dump());
  REQUIRE(j["changes"].size() == 4);
  CHECK(j["lost_iterations"].get<int>() <= j["changes"][0]["iterations_done"].get<int>());
  const auto resumed = j["resumed_at"].get<std::vector<int>>();
  CHECK(j["completed_iterations"].get<int>() > (resumed.empty() ? 0 : resumed.back()));
}

TEST_CASE("sailor replay --live: an on-demand pool of the cluster keeps the job training while every spot zone is down") {
  temp_dir dir;
  // Both spot zones fall at tick 2 with notice and return at tick 4; aws-v100-spot-anchor adds
  // two on-demand V100-16s in us-east-2b (one node with --nodes-per-zone 1), which the trace
  // never touches.
  auto trace = write_two_zone_trace(dir,
                                   "0,0,1,1\n1,60,1,1\n2,120,0,0\n3,180,0,0\n4,240,1,1\n5,300,1,1\n6,360,1,1\n");
  auto j = live_summary_on(dir, trace, "aws-v100-spot-anchor");
  CHECK(j["nodes_started"]["initially"] == 3);
  CHECK(j["nodes_stopped"]["with_notice"] == 2);
  CHECK(j["waits_for_capacity"] == 0);  // the anchor was there all along
  CHECK(j["lost_iterations"] == 0);
  REQUIRE(j["changes"].size() == 4);
  for (const auto& ch : j["changes"]) CHECK(ch["zone"] != "V100-16/on-demand@us-east-2b");
  // Trained while every spot zone was down: iterations between the falls and the returns.
  CHECK(j["changes"][2]["iterations_done"].get<int>() > j["changes"][1]["iterations_done"].get<int>());
  const auto& hours = j["gpu_hours"];
  REQUIRE(hours.size() == 3);
  CHECK(hours[2]["gpu_type"] == "V100-16/on-demand");
  CHECK(hours[2]["zone"] == "us-east-2b");
  CHECK(hours[2]["gpu_hours"].get<double>() == doctest::Approx(7 * 60 / 3600.0).epsilon(0.15));
  // Spot hours at $0.918, the pool's at $3.06 whatever the column of prices.
  const double spot_hours = hours[0]["gpu_hours"].get<double>() + hours[1]["gpu_hours"].get<double>();
  const double pool_hours = hours[2]["gpu_hours"].get<double>();
  CHECK(j["dollars"]["spot"].get<double>() == doctest::Approx(spot_hours * 0.918 + pool_hours * 3.06));
  CHECK(j["dollars"]["on_demand"].get<double>() == doctest::Approx((spot_hours + pool_hours) * 3.06));
}

TEST_CASE("sailor replay --live --policy restart_from_checkpoint restarts every node from the checkpoint on a change") {
  temp_dir dir;
  // Zone b falls at tick 2 and returns at tick 4; 2 s a tick, so that each restart is over
  // before the next change.
  auto trace = write_two_zone_trace(dir,
                                   "0,0,1,1\n1,60,1,1\n2,120,1,0\n3,180,1,0\n4,240,1,1\n5,300,1,1\n6,360,1,1\n");
  auto [r, j] = run_with_summary(
    live_replay(trace, "--policy restart_from_checkpoint --nodes-per-zone 1 --time-scale 30 --stall-timeout 30"),
    dir, 120);
  CHECK(j["policy"] == "restart_from_checkpoint");
  // The fall kills b's node (no hand-over), and a's is killed and started again; at the rise
  // a's new node is restarted once more beside b's new one.
  CHECK(j["nodes_stopped"]["without_notice"] == 1);
  CHECK(j["nodes_stopped"]["with_notice"] == 0);
  CHECK(j["restarts"]["full_restarts"] == 2);
  CHECK(j["restarts"]["nodes_killed_and_started_again"] == 2);
  REQUIRE(j["changes"].size() == 2);
  CHECK(j["changes"][0]["restarted_as"].size() == 1);
  CHECK(r.out.find("restart from the checkpoint: 1 node(s) killed and started again") != std::string::npos);
  // Each restart resumed from a checkpoint on disk, never from the start: no survivor held any
  // state (a restart whose every node was gone before the supervisor noticed is a fresh start
  // for it, with no recovery record; the plan still resumes after the checkpoint).
  REQUIRE(j["resumed_at"].size() >= 2);
  for (const auto& at : j["resumed_at"]) CHECK(at.get<int>() > 0);
  for (const auto& rec : j["recovery"])
    if (rec["cause"] == "loss") CHECK(rec["state_source"] == "checkpoint");
  // Training went on after the last restart.
  CHECK(j["completed_iterations"].get<int>() > j["changes"][1]["iterations_done"].get<int>());
}

}  // namespace integration_replay_live
#endif
