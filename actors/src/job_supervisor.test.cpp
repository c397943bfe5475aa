// The supervisor, zone coordinators, replica groups and planner actor under CAF's
// deterministic test scheduler: no threads, no wall clock; time moves only when the test
// advances it. Nodes are played by small fake actors.
#include "sailor/actors/job_supervisor.hpp"

#include <doctest/doctest.h>

#include "supervisor_fixture.hpp"


TEST_CASE_FIXTURE(deterministic, "supervisor: a quorum of nodes gets roles and every stage is ready") {
  start(options(4));
  join("n1", "a");
  join("n2", "a");
  join("n3", "b");
  CHECK(state().phase == supervisor_phase::collecting);
  CHECK(logs["n1"]->joined);
  CHECK(logs["n1"]->accepted.zone_actor == "zone:a");
  CHECK(logs["n1"]->accepted.heartbeat_interval_ms == 100);
  CHECK(logs["n1"]->assignments.empty());
  join("n4", "b");
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().plan_version == 1);
  CHECK(state().roles_total == 8);
  CHECK(state().roles_ready == 8);
  for (auto& n : {"n1", "n2", "n3", "n4"}) {
    REQUIRE(logs[n]->assignments.size() == 1);
    CHECK(logs[n]->assignments[0].roles.size() == 2);
    CHECK(state().nodes.at(n).state == node_state::ready);
  }
  // Each node's roles are in its own zone.
  for (auto& role : logs["n3"]->assignments[0].roles)
    CHECK(role.zone == "b");
  CHECK(has_event("all roles assigned"));
}

TEST_CASE_FIXTURE(deterministic, "supervisor: without a quorum it plans when the settle time is over") {
  start(options(0));
  join("n1", "a");
  join("n3", "b");
  CHECK(state().phase == supervisor_phase::collecting);
  for (int step = 0; step < 9; ++step)
    beat_and_advance({"n1", "n3"}, 100ms);
  CHECK(state().phase == supervisor_phase::collecting);
  CHECK(state().nodes.size() == 2);
  beat_and_advance({"n1", "n3"}, 100ms);
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().roles_ready == 4);
}

TEST_CASE_FIXTURE(deterministic, "supervisor: a silent node is lost after the heartbeat timeout and the rest re-planned") {
  start(options(4));
  join_four();
  REQUIRE(state().phase == supervisor_phase::running);
  std::vector<std::string> alive{"n1", "n2", "n3"};
  // n4 stays silent. Timeout 300 ms, checked every 100 ms.
  for (int step = 0; step < 3; ++step)
    beat_and_advance(alive, 100ms);
  CHECK(state().nodes.count("n4") == 1);  // silent for 300 ms: not beyond the timeout yet
  beat_and_advance(alive, 100ms);
  CHECK(state().nodes.count("n4") == 0);
  CHECK(has_event("node n4 lost: missed heartbeats"));
  CHECK(logs["n4"]->shut_down);  // a stalled node that wakes up must not keep its roles
  // ... and joins again as a new member rather than leave for good.
  CHECK(logs["n4"]->farewell == shutdown_kind::declared_lost);
  CHECK(state().plan_version == 2);
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().roles_total == 6);
  CHECK(state().roles_ready == 6);
  // Heartbeat ages are reported for the nodes still there.
  beat_and_advance(alive, 100ms);
  CHECK(state().nodes.at("n1").heard);
}

TEST_CASE_FIXTURE(deterministic, "supervisor: an endpoint that dies and a preemption notice are losses") {
  start(options(4));
  join_four();
  REQUIRE(state().phase == supervisor_phase::running);
  caf::anon_send_exit(fakes["n2"], caf::exit_reason::kill);
  sched.run();
  CHECK(state().nodes.count("n2") == 0);
  CHECK(has_event("node n2 lost: endpoint closed"));
  CHECK(state().plan_version == 2);
  caf::anon_send(fakes["n3"], preempt_atom::value);
  sched.run();
  CHECK(state().nodes.count("n3") == 0);
  CHECK(has_event("node n3 lost: preempted"));
  CHECK(state().plan_version == 3);
  CHECK(state().phase == supervisor_phase::running);
  // n1 (zone a, 2 devices) and n4 (zone b, 2 devices): two pipelines of 2 stages.
  CHECK(state().roles_total == 4);
  CHECK(state().roles_ready == 4);
}

TEST_CASE_FIXTURE(deterministic, "supervisor: bad joins are refused with a reason and change nothing") {
  start(options(4));
  join("n1", "a");
  auto unknown = join("x1", "mars");
  CHECK(unknown->refused);
  CHECK(unknown->refusal.find("unknown zone 'mars'") != std::string::npos);
  auto old = join("x2", "a", 2, 7);
  CHECK(old->refused);
  CHECK(old->refusal.find("protocol version 7") != std::string::npos);
  auto twin = join("n1", "b");
  CHECK(twin->refused);
  CHECK(twin->refusal.find("already joined") != std::string::npos);
  auto empty = join("x3", "a", 0);
  CHECK(empty->refused);
  CHECK(state().nodes.size() == 1);
  CHECK(state().phase == supervisor_phase::collecting);
  // The others are still served.
  join("n2", "a");
  join("n3", "b");
  join("n4", "b");
  CHECK(state().phase == supervisor_phase::running);
}

TEST_CASE_FIXTURE(deterministic, "supervisor: without a plan it waits, and plans again when capacity grows") {
  // A scheduler that wants at least 3 nodes.
  auto picky = system.spawn(planner_actor, [](const plan_request& r) -> sailor::result<sailor::config::plan> {
    if (r.nodes.size() < 3)
      return sailor::error{sailor::error_kind::infeasible, "need 3 nodes", "", 0, ""};
    return even_plan(r.nodes, 6, 8);
  });
  start(options(2), picky);
  join("n1", "a");
  join("n3", "b");
  CHECK(state().phase == supervisor_phase::waiting);
  CHECK(state().last_error == "need 3 nodes");
  join("n2", "a");
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().roles_ready == 6);
}

namespace {

// A user's scheduler (scheduler_api.hpp): everything on zone b, one stage per device, and a
// count of the availability events it saw.
struct user_scheduler_state {
  int joined = 0;
  int lost = 0;
  int requests = 0;
};

caf::behavior user_scheduler(caf::stateful_actor<user_scheduler_state>* self) {
  return {
    [self](const plan_request& r) -> plan_reply {
      ++self->state.requests;
      sailor::config::plan p;
      p.global_batch = 8;
      int layer = 0;
      for (auto& n : r.nodes) {
        if (n.zone != "b")
          continue;
        for (auto& d : n.devices)
          p.stages.push_back({layer++, 1, false, {sailor::config::replica{n.gpu_type, n.zone, 1, {n.name}, {d.index}}}});
      }
      if (p.stages.empty())
        return plan_reply::failure(r.request_id, "nothing in zone b");
      return plan_reply::success(r.request_id, p);
    },
    [self](const availability_event& e) {
      if (e.kind == availability_kind::joined)
        ++self->state.joined;
      else
        ++self->state.lost;
    },
  };
}

}  // namespace

TEST_CASE_FIXTURE(deterministic, "supervisor: a user's actor can be the scheduler") {
  auto scheduler = system.spawn(user_scheduler);
  start(options(3), adapt_scheduler(system, scheduler));  // a plain actor
  join("n1", "a");
  join("n3", "b");
  join("n4", "b");
  REQUIRE(state().phase == supervisor_phase::running);
  CHECK(state().current->num_stages() == 4);
  CHECK(logs["n1"]->assignments.at(0).roles.empty());
  CHECK(state().nodes.at("n1").state == node_state::idle);
  CHECK(logs["n3"]->assignments.at(0).roles.size() == 2);
  caf::anon_send_exit(fakes["n4"], caf::exit_reason::kill);
  sched.run();
  auto* user = dynamic_cast<caf::stateful_actor<user_scheduler_state>*>(
    caf::actor_cast<caf::abstract_actor*>(scheduler));
  REQUIRE(user != nullptr);
  CHECK(user->state.joined == 3);
  CHECK(user->state.lost == 1);
  CHECK(user->state.requests == 2);
  CHECK(state().current->num_stages() == 2);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(deterministic, "supervisor: with a status board, it publishes its state, the plan and classified events") {
  auto board = std::make_shared<status_board>();
  auto o = options();
  o.board = board;
  start(o);
  join_four();
  auto snap = board->snapshot();
  CHECK(snap->status.phase == "running");
  CHECK(snap->status.nodes.size() == 4);
  REQUIRE(snap->plan.has_value());
  CHECK(snap->plan->num_stages() == snap->status.stages);
  int joins = 0;
  for (auto& e : board->events())
    joins += e.kind == "join" ? 1 : 0;
  CHECK(joins == 4);

  caf::anon_send(fakes["n3"], preempt_atom::value);
  sched.run();
  auto events = board->events();
  bool preempted = false, replanned = false;
  for (auto& e : events) {
    preempted = preempted || (e.kind == "preempted" && e.node == "n3");
    if (e.kind == "plan" && e.plan_version == 2) {
      replanned = true;
      CHECK(e.reason == "node n3 lost");
    }
  }
  CHECK(preempted);
  CHECK(replanned);
  CHECK(board->snapshot()->status.nodes.size() == 3);
  CHECK(board->snapshot()->status.plan_version == 2);
}

namespace {

// An iteration report of plan `version` from `rank`, the one rank of stage `rank`.
train_report iteration_report(std::int64_t version, std::int64_t iteration, int rank = 0,
                              double loss = 0) {
  train_report r;
  r.plan_version = version;
  r.rank = rank;
  r.stage = rank;
  r.iteration = iteration;
  r.loss = loss;
  return r;
}

}  // namespace

TEST_CASE("training progress: a plan resumed from a checkpoint finishes after the iterations left") {
  // A coordinator restarted on a job that checkpointed 10 of 15 iterations has no records of
  // those 10: the count comes from the checkpoint (start_iteration), not from the records.
  training_progress fresh{7, 2, 15, 1, 0.0, 10, {}};
  CHECK(fresh.completed_count() == 10);
  CHECK_FALSE(fresh.finished());
  for (std::int64_t it = 10; it < 15; ++it)
    for (int rank = 0; rank < 2; ++rank) {
      auto done = fresh.add(iteration_report(7, it, rank, 1.0));
      CHECK(done.has_value() == (rank == 1));
    }
  CHECK(fresh.completed_count() == 15);
  CHECK(fresh.finished());

  // Within one coordinator, a re-plan that resumes at 4 keeps the records before 4 for the
  // loss curve; a record the old plan never completed (iteration 2 here) does not hold the
  // count back.
  std::vector<iteration_record> earlier(5);
  for (int k = 0; k < 5; ++k) earlier[k].iteration = k;
  earlier.erase(earlier.begin() + 2);
  training_progress resumed{8, 1, 6, 0, 0.0, 4, earlier};
  CHECK(resumed.completed_count() == 4);
  CHECK(resumed.loss_curve().size() == 3);
  for (std::int64_t it = 4; it < 6; ++it)
    resumed.add(iteration_report(8, it));
  CHECK(resumed.finished());
}

TEST_CASE("training progress: a fine-tuning job's validation before training is the curve's point 0") {
  training_progress p{5, 2, 4, 1, 0.0};
  auto before = [](int rank, double val) {
    auto r = iteration_report(5, 0, rank, 0.0);
    r.kind = static_cast<std::int32_t>(report_kind::reached);
    r.phase = initial_validation_phase;
    r.has_val_loss = true;
    r.val_loss = val;
    return r;
  };
  CHECK_FALSE(p.add(before(0, 99)).has_value());  // the first stage's: not the one taken
  CHECK_FALSE(p.add(before(1, 1.75)).has_value());
  CHECK(p.completed_count() == 0);  // no iteration completed by it
  REQUIRE(p.val_loss_curve().size() == 1);
  CHECK(p.val_loss_curve()[0].iteration == 0);
  CHECK(p.val_loss_curve()[0].loss == doctest::Approx(1.75));
  CHECK(p.loss_curve().empty());
  // Carried to the next plan as the supervisor does, ahead of the passes after iterations.
  training_progress next{6, 1, 4, 0, 0.0, 0, p.completed()};
  next.set_initial_val_loss(p.initial_val_loss());
  auto r = iteration_report(6, 1);
  r.has_val_loss = true;
  r.val_loss = 1.5;
  next.add(r);
  REQUIRE(next.val_loss_curve().size() == 2);
  CHECK(next.val_loss_curve()[0].iteration == 0);
  CHECK(next.val_loss_curve()[1].iteration == 2);
}

TEST_CASE("training progress: the validation loss comes from the last stage's first rank and its curve survives a re-plan") {
  // Two stages; the validation pass ran after iterations 2 and 4 (0-based 1 and 3).
  training_progress first{3, 2, 6, 1, 0.0};
  for (std::int64_t it = 0; it < 4; ++it)
    for (int rank = 0; rank < 2; ++rank) {
      auto r = iteration_report(3, it, rank, 3.0 - 0.1 * static_cast<double>(it));
      r.has_val_loss = it % 2 == 1;
      // Every rank computes the same number; the first stage's is off here to show which is
      // taken.
      r.val_loss = rank == 1 ? 2.5 - 0.1 * static_cast<double>(it) : 99;
      first.add(r);
    }
  auto curve = first.val_loss_curve();
  REQUIRE(curve.size() == 2);
  CHECK(curve[0].iteration == 2);
  CHECK(curve[0].loss == doctest::Approx(2.4));
  CHECK(curve[1].iteration == 4);
  CHECK(curve[1].loss == doctest::Approx(2.2));
  REQUIRE(first.completed().size() == 4);
  CHECK_FALSE(first.completed()[0].val_loss);
  // A plan resuming from the checkpoint after 3 iterations keeps the pass after 2; the pass
  // after 4 comes again from the new plan.
  training_progress second{4, 1, 6, 0, 0.0, 3, first.completed()};
  REQUIRE(second.val_loss_curve().size() == 1);
  CHECK(second.val_loss_curve()[0].iteration == 2);
  auto r = iteration_report(4, 3);
  r.has_val_loss = true;
  r.val_loss = 2.2;
  second.add(r);
  REQUIRE(second.val_loss_curve().size() == 2);
  CHECK(second.val_loss_curve()[1].iteration == 4);
}
