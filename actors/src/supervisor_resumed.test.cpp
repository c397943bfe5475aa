// A supervisor that continues the job of an earlier coordinator process (options.resumed, read
// from the coordinator's journal): its plan versions go on, the iterations before the state
// its first plan resumes from are kept, those after it run again and count once, and the first
// iteration closes a recovery record of cause "coordinator_restart".
#include <doctest/doctest.h>

#include "training_run_fixture.hpp"

TEST_CASE_FIXTURE(training_run, "supervisor: a restarted coordinator's plans number on from its journal and keep its iterations") {
  auto o = training(false, 4);  // the nodes' newest checkpoint: after 4 iterations
  auto recoveries = std::make_shared<std::vector<recovery_record>>();
  o.on_recovery = [recoveries](const recovery_record& r) { recoveries->push_back(r); };
  resumed_job job;
  job.plan_version = 3;
  for (int i = 0; i < 6; ++i) {  // the journal: iterations 0-5 completed, 4 and 5 after that checkpoint
    iteration_record r;
    r.iteration = i;
    r.loss = 5.0 - i;
    job.completed.push_back(r);
  }
  job.initial_val_loss = 6.5;
  o.resumed = job;
  start(o);
  CHECK(has_event("continues the job after plan v3 and 6 completed iterations (journal)"));
  CHECK(state().training.completed_count() == 6);  // what `sailor status` says before a plan
  join_four();
  REQUIRE(state().plan_version == 4);  // not v1: its checkpoint folder would be v1's again
  CHECK(state().training.start_iteration() == 4);
  for (const auto& n : {"n1", "n2", "n3", "n4"}) {
    report_all(n, report_kind::reached, "setup");
    report_all(n, report_kind::reached, "restore");
  }
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::iteration, "", 4);
  REQUIRE(recoveries->size() == 1);
  const auto& r = recoveries->front();
  CHECK(r.cause == "coordinator_restart");
  CHECK(r.plan_version == 4);
  CHECK(r.start_iteration == 4);
  CHECK(r.lost_iterations == 2);  // iterations 4 and 5 run again
  CHECK(r.state_source == "checkpoint");
  CHECK(r.total_s >= 0);
  CHECK(state().training.completed_count() == 5);
  const auto curve = state().training.loss_curve();
  REQUIRE(curve.size() == 5);
  CHECK(curve[0] == 5.0);
  CHECK(curve[3] == 2.0);
  CHECK(curve[4] == 0.0);  // iteration 4 as run again (the fake ranks report loss 0)
  REQUIRE(state().training.initial_val_loss());
  CHECK(*state().training.initial_val_loss() == 6.5);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a journal with no plan yet starts the job at plan v1, with no recovery") {
  auto o = training(false, 0);
  auto recoveries = std::make_shared<std::vector<recovery_record>>();
  o.on_recovery = [recoveries](const recovery_record& r) { recoveries->push_back(r); };
  o.resumed = resumed_job{};
  start(o);
  join_four();
  REQUIRE(state().plan_version == 1);
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::reached, "setup");
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::iteration, "", 0);
  CHECK(state().training.completed_count() == 1);
  CHECK(recoveries->empty());
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node that claims a plan version the journal never issued is refused and logged") {
  auto o = training(false, 4);
  resumed_job job;
  job.plan_version = 3;
  o.resumed = job;
  o.refuse_unknown_plans = true;
  o.quorum = 2;
  start(o);
  auto stranger = join("n9", "a", 2, protocol_version, false, "cpu", 9);
  CHECK(stranger->refused);
  CHECK(stranger->refusal.find("ran plan v9, which this job never issued (its journal's newest is v3)") !=
        std::string::npos);
  CHECK(has_event("refused node 'n9': it ran plan v9, which this job never issued (its journal's newest is v3): "
                  "it comes from another job, or from a coordinator whose journal is not this one"));
  CHECK(state().nodes.count("n9") == 0);
  // The nodes of the job's own plans are taken back, and the next plan is v4.
  auto n1 = join("n1", "a", 2, protocol_version, false, "cpu", 3);
  auto n2 = join("n2", "b", 2, protocol_version, false, "cpu", 0);
  CHECK_FALSE(n1->refused);
  CHECK_FALSE(n2->refused);
  CHECK(state().plan_version == 4);
}
