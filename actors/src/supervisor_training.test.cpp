// The supervisor's side of training under the deterministic scheduler: failures reported as
// their own kind, the start-up steps of a plan and their deadlines, restore fallbacks and
// checkpoint write failures. The nodes are fake actors; their ranks' reports are sent from
// their own endpoints. (supervisor_state_holders.test.cpp: where a plan's state comes from.)
#include <doctest/doctest.h>

#include "training_run_fixture.hpp"

TEST_CASE("training progress: a failure is kept whatever its iteration, before the resume point too") {
  training_progress resumed{3, 2, 15, 1, 0.0, 10, {}};
  train_report r;
  r.plan_version = 3;
  r.node = "n1";
  r.iteration = 0;  // a rank that failed restoring, before its first iteration
  r.kind = static_cast<std::int32_t>(report_kind::failed);
  r.phase = "restore";
  r.error = "shard-x.ckpt does not match its checksum";
  resumed.add(r);
  CHECK(resumed.error().find("does not match its checksum") != std::string::npos);
  CHECK(resumed.failure().phase == "restore");
  // A sender that predates the kind: an error is a failure too.
  training_progress legacy{3, 2, 15, 1, 0.0, 10, {}};
  r.kind = 0;
  legacy.add(r);
  CHECK_FALSE(legacy.error().empty());
  // Start-up steps are counted by node; old iteration reports are still dropped.
  training_progress steps{3, 2, 15, 1, 0.0, 10, {}};
  train_report s;
  s.plan_version = 3;
  s.node = "n2";
  s.kind = static_cast<std::int32_t>(report_kind::reached);
  s.phase = "setup";
  steps.add(s);
  CHECK(steps.reached("setup", "n2") == 1);
  CHECK(steps.reached("setup") == 1);
  s.phase = "anything";  // not a step: not kept
  steps.add(s);
  CHECK(steps.reached("anything") == 0);
}

TEST_CASE_FIXTURE(training_run, "supervisor: ranks of a plan that cannot meet in set-up are planned again over the same nodes, twice in a row, then the job fails") {
  // A resumed plan's rank fails before its first iteration: it is heard all the same.
  start(training(false, 5));
  join_four();
  REQUIRE(state().plan_version == 1);
  REQUIRE(state().training.start_iteration() == 5);
  const std::string refused = "communicators: rendezvous failed: connect: Connection refused";
  for (int attempt = 1; attempt <= 2; ++attempt) {
    CAPTURE(attempt);
    send("n2", failure("n2", "setup", refused));
    run_for(400ms);
    CHECK(failures->empty());
    REQUIRE(state().plan_version == attempt + 1);
    CHECK(state().nodes.size() == 4);
    CHECK(has_event("plan v" + std::to_string(attempt) + " could not start: n2 rank 0 (setup): " +
                    refused + "; planning again over the nodes still joined (try " +
                    std::to_string(attempt) + " of 2)"));
  }
  send("n2", failure("n2", "setup", refused));
  run_for(400ms);
  REQUIRE(failures->size() == 1);
  CHECK(failures->front().find("rendezvous failed") != std::string::npos);
  CHECK(failures->front().find("n2") != std::string::npos);
  CHECK(state().plan_version == 3);  // no further plan
}

TEST_CASE_FIXTURE(training_run, "supervisor: a plan that starts clears the count of set-up retries") {
  start(training());
  join_four();
  send("n2", failure("n2", "setup", "communicators: rendezvous timed out"));
  run_for(400ms);
  REQUIRE(state().plan_version == 2);
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::reached, "setup");
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::iteration, "", 0);
  REQUIRE(state().startup_step.empty());  // plan v2 started
  CHECK(state().setup_retries == 0);
  lose("n4");
  for (const auto& n : {"n1", "n2", "n3"})
    report_kept(n, 1, shard("checkpoints/j/mem", 1), {}, 2);
  REQUIRE(state().plan_version == 3);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    send("n1", failure("n1", "setup", "communicators: rendezvous timed out"));
    run_for(400ms);
    CHECK(failures->empty());
  }
  CHECK(state().plan_version == 5);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node that does not answer its roles misses the assignment deadline and the job is re-planned without it") {
  start(training());
  join("n1", "a");
  join("n2", "a");
  join("n3", "b");
  auto stuck = join("n4", "b", 2, protocol_version, true);
  REQUIRE(state().plan_version == 1);
  CHECK(state().phase == supervisor_phase::assigning);
  CHECK(state().startup_step == "assignment");
  run_for(1200ms);
  CHECK(stuck->shut_down);
  CHECK(state().nodes.count("n4") == 0);
  CHECK(has_event("node n4 lost: missed the assignment deadline of plan v1 (1 s)"));
  CHECK(state().plan_version == 2);
  CHECK(state().phase == supervisor_phase::running);
  CHECK(failures->empty());
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node whose ranks miss the set-up deadline is dropped and the job re-planned") {
  start(training());
  join_four();
  REQUIRE(state().phase == supervisor_phase::running);
  CHECK(state().startup_step == "setup");
  for (auto n : {"n1", "n2", "n3"})
    report_all(n, report_kind::reached, "setup");
  CHECK(state().startup_step == "setup");
  auto status = snapshot_line();
  CHECK(status.find("starting: setup") != std::string::npos);
  run_for(1200ms);
  CHECK(state().nodes.count("n4") == 0);
  CHECK(has_event("node n4 lost: missed the setup deadline of plan v1"));
  CHECK(state().plan_version == 2);
  // The next plan starts: every rank through set-up, then the first iteration.
  for (auto n : {"n1", "n2", "n3"})
    report_all(n, report_kind::reached, "setup");
  CHECK(state().startup_step == training_progress::first_iteration_step);
  for (auto n : {"n1", "n2", "n3"})
    report_all(n, report_kind::iteration, "", 0);
  CHECK(state().startup_step.empty());
  CHECK(state().training.completed_count() == 1);
  CHECK(failures->empty());
}

TEST_CASE_FIXTURE(training_run, "supervisor: when every node misses a step they get one more try, then the job fails clearly") {
  start(training());
  join_four();
  run_for(1200ms);
  CHECK(has_event("missed the setup deadline of plan v1 (1 s); trying once more"));
  CHECK(state().plan_version == 2);
  CHECK(failures->empty());
  run_for(1200ms);
  REQUIRE(failures->size() == 1);
  CHECK(failures->front().find("every node (n1, n2, n3, n4) missed the setup deadline of plan "
                               "v2 (1 s) twice") != std::string::npos);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a peer that cannot be reached at its advertised address is dropped and the job re-planned") {
  start(training());
  join_four();
  send("n1", failure("n1", "setup",
                     "node n1 cannot reach node n3 at n3:7000 (the address it advertised): "
                     "connection refused",
                     0, "n3"));
  CHECK(state().nodes.count("n3") == 0);
  CHECK(logs.at("n3")->shut_down);
  CHECK(has_event("node n3 lost: unreachable by its peers: node n1 cannot reach node n3 at "
                  "n3:7000"));
  CHECK(state().plan_version == 2);
  run_for(400ms);
  CHECK(failures->empty());
  // The new plan's job names its peers and their addresses, for the ranks to check.
  auto& job = logs.at("n1")->jobs.back();
  CHECK(job.plan_version == 2);
  CHECK(job.peer_nodes == std::vector<std::string>{"n1", "n2", "n4"});
  CHECK(job.peer_addresses == std::vector<std::string>{"n1:7000", "n2:7000", "n4:7000"});
}

TEST_CASE_FIXTURE(training_run, "supervisor: a checkpoint that cannot be restored is forgotten and the job resumes from an older one") {
  start(training());
  join_four();
  held_checkpoints(*this);
  caf::anon_send(fakes.at("n4"), preempt_atom::value);
  sched.run();
  REQUIRE(state().plan_version == 2);
  CHECK(logs.at("n1")->jobs.back().start_iteration == 4);
  send("n2", failure("n2", "restore", "restoring the checkpoint after iteration 4: shard-x does "
                                      "not match its checksum"));
  CHECK(has_event("restoring the checkpoint after iteration 4 failed on n2"));
  REQUIRE(state().plan_version == 3);
  CHECK(logs.at("n1")->jobs.back().start_iteration == 2);
  // Reported again (an old rank's report): the bad checkpoint stays forgotten.
  train_report again;
  again.plan_version = 1;
  again.node = "n1";
  again.checkpoint_file = shard("checkpoints/j/v1", 4);
  send("n1", again);
  CHECK(state().holdings.newest().iterations == 2);
  run_for(400ms);
  CHECK(failures->empty());
}

TEST_CASE_FIXTURE(training_run, "supervisor: checkpoint writes that fail are told in the events and the status while training goes on") {
  start(training());
  join_four();
  auto r = failure("n2", "", "writing checkpoints/j/v1/iter-00000001: Read-only file system", 0);
  r.kind = static_cast<std::int32_t>(report_kind::checkpoint_failed);
  send("n2", r);
  send("n2", r);  // told once
  int told = 0;
  for (auto& e : state().events)
    told += e.find("checkpoint writes fail on node n2: writing checkpoints/j/v1/iter-00000001: "
                   "Read-only file system; training goes on") != std::string::npos;
  CHECK(told == 1);
  CHECK(snapshot_line().find("checkpoint writes fail on n2") != std::string::npos);
  run_for(400ms);
  CHECK(failures->empty());
  CHECK(state().plan_version == 1);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node leaving with notice is told of the next plan, with no role, so that its shard server lets that plan's nodes fetch its state") {
  four_nodes_through_first_iteration();
  const auto ranks = state().nodes.at("n4").roles.size();
  caf::anon_send(fakes.at("n4"), preempt_atom::value);
  sched.run();
  REQUIRE(state().recovery.leaving.count("n4") == 1);
  const auto file = shard("checkpoints/j/mem", 1);
  for (const auto& n : {"n1", "n2", "n3"})
    report_kept(n, 1, file);
  for (std::size_t k = 0; k < ranks; ++k) {
    train_report kept;
    kept.plan_version = 1;
    kept.node = "n4";
    kept.rank = static_cast<int>(k);
    kept.kind = static_cast<std::int32_t>(report_kind::snapshot);
    kept.iteration = 1;
    kept.checkpoint_file = file;
    send("n4", kept);
  }
  REQUIRE(state().plan_version == 2);
  const auto& told = *logs.at("n4");
  REQUIRE_FALSE(told.jobs.empty());
  CHECK(told.jobs.back().plan_version == 2);
  REQUIRE_FALSE(told.assignments.empty());
  CHECK(told.assignments.back().plan_version == 2);
  CHECK(told.assignments.back().roles.empty());
  CHECK(told.assignments.back().plan.num_stages() > 0);
}
