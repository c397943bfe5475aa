// How far behind training the job's newest complete checkpoint is, as `sailor status` and the
// dashboard show it, and the warning when it falls more than 3 checkpoint intervals behind
// (checkpoint writes that fail, a full disk). Under the deterministic scheduler; the nodes
// are fake actors.
#include <doctest/doctest.h>

#include "training_run_fixture.hpp"

namespace {

struct checkpoint_age_run : training_run {
  // Plans train 10 iterations and write a checkpoint every `every` iterations (0: none).
  void start_writing(int every) {
    auto o = training(false);
    o.prepare_training = [every](training_job& j, const checkpoint_holdings&) {
      j.iterations = 10;
      j.checkpoint_dir = "checkpoints/j/v" + std::to_string(j.plan_version);
      j.checkpoint_every = every;
      return true;
    };
    start(o);
    join_four();
    for (const auto& n : {"n1", "n2", "n3", "n4"})
      report_all(n, report_kind::reached, "setup");
  }
  void complete_iteration(int iteration) {
    for (const auto& n : {"n1", "n2", "n3", "n4"})
      report_all(n, report_kind::iteration, "", iteration);
  }
  // The one writer's shard of the checkpoint after `iterations` is in place.
  void checkpoint_written(int iterations) {
    train_report r;
    r.plan_version = 1;
    r.node = "n1";
    r.iteration = iterations - 1;
    r.checkpoint_file = shard("checkpoints/j/v1", iterations);
    send("n1", r);
  }
  cluster_status status() {
    run_for(200ms);
    return board->snapshot()->status;
  }
};

}  // namespace

TEST_CASE_FIXTURE(checkpoint_age_run, "supervisor: the status tells how far behind the newest complete checkpoint is and warns past 3 intervals") {
  start_writing(1);
  // Checkpoints keep up: after iteration 2, with iterations 0..2 completed.
  for (int it = 0; it < 3; ++it)
    complete_iteration(it);
  checkpoint_written(2);
  auto s = status();
  REQUIRE(s.training_completed == 3);
  CHECK(s.checkpoint_every == 1);
  CHECK(s.checkpoint_iterations == 2);
  CHECK(s.checkpoint_behind == 1);
  CHECK(s.checkpoint_age_s >= 0);
  CHECK(s.checkpoint_age_s <= 0.25);  // seen complete 200 ms before the newest publish at most
  const double first_age = s.checkpoint_age_s;
  CHECK(s.checkpoint_warning.empty());

  // The writes stop (a full disk): three more iterations are still within 3 intervals, the
  // fourth is not.
  for (int it = 3; it < 6; ++it)
    complete_iteration(it);
  s = status();
  CHECK(s.checkpoint_behind == 4);
  CHECK(s.checkpoint_iterations == 2);
  REQUIRE(!s.checkpoint_warning.empty());
  CHECK(s.checkpoint_warning.find("after iteration 2") != std::string::npos);
  CHECK(s.checkpoint_warning.find("4 iterations behind") != std::string::npos);
  CHECK(s.checkpoint_age_s > first_age);  // the same checkpoint, older

  // Writes resume: the warning goes.
  checkpoint_written(6);
  s = status();
  CHECK(s.checkpoint_iterations == 6);
  CHECK(s.checkpoint_behind == 0);
  CHECK(s.checkpoint_warning.empty());
}

TEST_CASE_FIXTURE(checkpoint_age_run, "supervisor: the checkpoint interval sets the bound, and no checkpoint at all is warned of too") {
  start_writing(2);
  for (int it = 0; it < 6; ++it)
    complete_iteration(it);
  auto s = status();
  CHECK(s.checkpoint_iterations == 0);
  CHECK(s.checkpoint_behind == 6);
  CHECK(s.checkpoint_age_s < 0);
  CHECK(s.checkpoint_warning.empty());  // 6 is not more than 3 x 2
  complete_iteration(6);
  s = status();
  CHECK(s.checkpoint_behind == 7);
  CHECK(s.checkpoint_warning.find("no checkpoint is complete yet") != std::string::npos);
}

TEST_CASE_FIXTURE(checkpoint_age_run, "supervisor: a plan that writes no checkpoints shows no checkpoint age") {
  start_writing(0);
  for (int it = 0; it < 8; ++it)
    complete_iteration(it);
  auto s = status();
  CHECK(s.training_completed == 8);
  CHECK(s.checkpoint_every == 0);
  CHECK(s.checkpoint_warning.empty());
}
