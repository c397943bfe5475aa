// The supervisor's numerical guards under the deterministic scheduler: an iteration whose loss
// or gradient norm is not finite (report_kind::diverged, from every rank) sends the job back
// to the newest checkpoint on disk, never to the ranks' memory; reaching it again fails the
// job, naming the iteration. The nodes are fake actors (training_run_fixture.hpp).
#include <doctest/doctest.h>

#include "training_run_fixture.hpp"

namespace {

// Every rank of the current plan says iteration `iteration` was not finite, then that it
// keeps no state; `kept` (not empty): one node says it kept its state there all the same.
void diverge(training_run& t, int iteration, const std::string& kept = {}) {
  const auto version = t.state().plan_version;
  std::vector<std::string> names;
  for (auto& [name, node] : t.state().nodes)
    if (!node.roles.empty())
      names.push_back(name);
  for (const auto& n : names) {
    auto r = t.failure(n, "iteration", "[stage 0 replica 0 tp 0]: the loss is nan", iteration);
    r.kind = static_cast<std::int32_t>(report_kind::diverged);
    t.send(n, r);
  }
  for (const auto& n : names)
    t.report_kept(n, iteration, kept.empty() || n != names.front() ? std::string{} : kept,
                  kept.empty() || n != names.front() ? "not kept" : std::string{}, version);
}

// The current plan's ranks get through set-up and restore.
void start_up(training_run& t) {
  for (const auto& [name, node] : t.state().nodes)
    if (!node.roles.empty()) {
      t.report_all(name, report_kind::reached, "setup");
      t.report_all(name, report_kind::reached, "restore");
    }
}

}  // namespace

TEST_CASE_FIXTURE(training_run, "supervisor: an iteration that is not finite sends the job back to the newest checkpoint, not to the ranks' memory") {
  four_nodes_through_first_iteration();
  held_checkpoints(*this);
  // n1 claims it kept the state that led to the non-finite loss: it is not resumed from.
  diverge(*this, 5, shard("checkpoints/j/mem", 5));
  REQUIRE(state().plan_version == 2);
  CHECK(logs.at("n1")->jobs.back().start_iteration == 4);
  CHECK(logs.at("n1")->jobs.back().restore_dir == "checkpoints/j/v1");
  CHECK(has_event("iteration 6 (n1 rank 0: [stage 0 replica 0 tp 0]: the loss is nan) is not "
                  "finite; going back to the newest checkpoint"));
  run_for(400ms);
  CHECK(failures->empty());
}

TEST_CASE_FIXTURE(training_run, "supervisor: an iteration not finite again after going back fails the job, naming it") {
  four_nodes_through_first_iteration();
  held_checkpoints(*this);
  diverge(*this, 5);
  REQUIRE(state().plan_version == 2);
  start_up(*this);
  diverge(*this, 5);
  run_for(400ms);
  REQUIRE(failures->size() == 1);
  CHECK(failures->front().find("iteration 6 (") == 0);
  CHECK(failures->front().find("the loss is nan") != std::string::npos);
  CHECK(failures->front().find("is not finite again after going back to the checkpoint after "
                               "iteration 4: the job cannot get past it") != std::string::npos);
  CHECK(state().plan_version == 2);  // no further plan
}

TEST_CASE_FIXTURE(training_run, "supervisor: a job that got past the iteration that was not finite goes back again for a later one") {
  four_nodes_through_first_iteration();
  held_checkpoints(*this);
  diverge(*this, 5);
  REQUIRE(state().plan_version == 2);
  start_up(*this);
  diverge(*this, 7);
  REQUIRE(state().plan_version == 3);
  CHECK(logs.at("n1")->jobs.back().start_iteration == 4);
  run_for(400ms);
  CHECK(failures->empty());
  // Not finite again at that later iteration: the job fails.
  start_up(*this);
  diverge(*this, 7);
  run_for(400ms);
  REQUIRE(failures->size() == 1);
  CHECK(failures->front().find("iteration 8 (") == 0);
}
