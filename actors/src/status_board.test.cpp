// The status board alone: event classification, the loss curve across a resumed re-plan, the
// recovery time of a plan after a loss, and the bounds on every log.
#include "sailor/actors/status_board.hpp"

#include <doctest/doctest.h>

using namespace sailor::actors;

namespace {

iteration_record iteration(std::int64_t k, double loss) {
  iteration_record r;
  r.iteration = k;
  r.loss = loss;
  r.measured_s = 0.1;
  r.tokens = 512;
  r.reports = 2;
  return r;
}

}  // namespace

TEST_CASE("status board: the supervisor's event lines are classified") {
  CHECK(classify_event("node n1 joined (local-a, 2 x CPU)").kind == "join");
  CHECK(classify_event("node n1 joined (local-a, 2 x CPU)").node == "n1");
  auto pre = classify_event("node n2 lost: preempted (spot notice)");
  CHECK(pre.kind == "preempted");
  CHECK(pre.node == "n2");
  auto lost = classify_event("node n3 lost: missed heartbeats");
  CHECK(lost.kind == "lost");
  CHECK(lost.node == "n3");
  auto refused = classify_event("refused node 'x': unknown zone 'mars' (the cluster has: a)");
  CHECK(refused.kind == "refused");
  CHECK(refused.node == "x");
  auto plan = classify_event("plan v12: 2 stages, 2 replicas, 4 roles");
  CHECK(plan.kind == "plan");
  CHECK(plan.plan_version == 12);
  CHECK(classify_event("plan v3 resumes training from the checkpoint after iteration 5").kind ==
        "resume");
  CHECK(classify_event("all roles assigned and ready (plan v2, 4 stage actors)").plan_version ==
        2);
  CHECK(classify_event("no plan: nothing fits").kind == "no_plan");
  CHECK(classify_event("stage 1 replica 0 failed on n1: boom").kind == "failure");
  CHECK(classify_event("training finished: 10 iterations of plan v1").kind == "training");
  CHECK(classify_event("something new").kind == "other");
}

TEST_CASE("status board: a re-plan after a loss carries its reason and recovery time, and a "
          "resume rewinds the curve") {
  status_board board;
  board.planning("quorum of 2 nodes reached");
  board.add_event("plan v1: 2 stages, 1 replicas, 2 roles", 0);
  for (int k = 0; k < 6; ++k)
    board.add_iteration(iteration(k, 5.0 - 0.1 * k), 1, 0.2);
  board.add_event("node n2 lost: endpoint closed", 1);
  board.planning("node n2 lost");
  board.add_event("plan v2: 1 stages, 1 replicas, 1 roles", 1);
  board.add_event("plan v2 resumes training from the checkpoint after iteration 4", 2);
  auto before = board.metrics(0, 100);
  // Iterations 4 and 5 run again under plan v2.
  board.add_iteration(iteration(4, 4.6), 2, 0.3);

  auto page = board.metrics(0, 100);
  REQUIRE(page.points.size() == 5);
  CHECK(page.points.back().iteration == 4);
  CHECK(page.points.back().plan_version == 2);
  CHECK(page.points.back().predicted_s == doctest::Approx(0.3));
  CHECK(page.curve_id != before.curve_id);
  CHECK(page.newest == 4);
  REQUIRE(page.plans.size() == 2);
  CHECK(page.plans[0].first_iteration == 0);
  CHECK(page.plans[0].reason == "quorum of 2 nodes reached");
  CHECK(page.plans[0].recovery_s < 0);
  CHECK(page.plans[1].plan_version == 2);
  CHECK(page.plans[1].first_iteration == 4);
  CHECK(page.plans[1].reason == "node n2 lost");
  CHECK(page.plans[1].recovery_s >= 0);

  bool found = false;
  for (auto& e : board.events())
    if (e.kind == "plan" && e.plan_version == 2) {
      found = true;
      CHECK(e.reason == "node n2 lost");
      CHECK(e.recovery_s >= 0);
    }
  CHECK(found);

  auto tail = board.metrics(3, 1);
  REQUIRE(tail.points.size() == 1);
  CHECK(tail.points[0].iteration == 3);
  CHECK(tail.more);
  CHECK(board.metrics(5, 10).points.empty());
}

TEST_CASE("status board: logs are bounded and reports are those of the newest iterations") {
  status_board::limits l;
  l.events = 3;
  l.points = 4;
  l.reports = 6;
  status_board board{l};
  for (int k = 0; k < 10; ++k) {
    board.add_event("node n" + std::to_string(k) + " joined (a, 1 x CPU)", 0);
    board.add_iteration(iteration(k, 1.0), 1, 0);
    for (int rank = 0; rank < 2; ++rank) {
      train_report r;
      r.plan_version = 1;
      r.rank = rank;
      r.iteration = k;
      board.add_report(r);
    }
  }
  auto events = board.events();
  REQUIRE(events.size() == 3);
  CHECK(events.back().node == "n9");
  CHECK(events.back().seq == 10);
  CHECK(board.metrics(0, 100).points.size() == 4);
  CHECK(board.metrics(0, 100).points.front().iteration == 6);
  auto reports = board.reports(2);
  CHECK(reports.size() == 4);
  for (auto& r : reports)
    CHECK(r.report.iteration >= 8);
}

TEST_CASE("status board: readers keep the snapshot they took while the writer publishes") {
  status_board board;
  CHECK(board.snapshot()->status.phase.empty());
  board_snapshot s;
  s.status.phase = "running";
  board.publish(s);
  auto held = board.snapshot();
  s.status.phase = "planning";
  board.publish(s);
  CHECK(held->status.phase == "running");
  CHECK(board.snapshot()->status.phase == "planning");
}

TEST_CASE("status board: re-plans are counted by cause, the first plan is not one, and "
          "recoveries by theirs") {
  CHECK(plan_cause("node n2 lost") == "node_lost");
  CHECK(plan_cause("node n2 lost while planning") == "node_lost");
  CHECK(plan_cause("node n5 joined") == "node_joined");
  CHECK(plan_cause("node n5 drained") == "scheduler");
  CHECK(plan_cause("the scheduler asked: cheaper") == "scheduler");
  CHECK(plan_cause("the checkpoint after iteration 4 could not be restored") == "restore_failed");
  CHECK(plan_cause("iteration 6 (n1 rank 0: [stage 1 replica 0]: the loss is nan) is not finite") ==
        "non_finite");
  CHECK(plan_cause("quorum of 3 nodes reached") == "start");
  CHECK(plan_cause("something new") == "other");
  status_board board;
  board.planning("quorum of 2 nodes reached");
  board.add_event("plan v1: 2 stages, 1 replicas, 2 roles", 0);
  CHECK(board.counters().replans.empty());
  board.add_event("node n2 lost: endpoint closed", 1);
  board.planning("node n2 lost");
  board.add_event("plan v2: 1 stages, 1 replicas, 1 roles", 1);
  board.add_recovery("loss", 1.5);
  board.add_event("re-planning on drift: stage 0 is 40% slower than predicted", 2);
  board.planning("stage 0 is 40% slower than predicted");
  board.add_event("plan v3: 2 stages, 1 replicas, 2 roles", 2);
  board.add_recovery("replan", 0.5);
  board.planning("node n3 joined");
  board.add_event("plan v4: 2 stages, 2 replicas, 4 roles", 3);
  const auto c = board.counters();
  CHECK(c.replans == std::map<std::string, std::int64_t>{{"drift", 1}, {"node_joined", 1},
                                                         {"node_lost", 1}});
  CHECK(c.recoveries == std::map<std::string, std::int64_t>{{"loss", 1}, {"replan", 1}});
  CHECK(c.last_recovery_s == 0.5);
}
