// The supervisor training tests' fixture: a deterministic supervisor whose plans train 10
// iterations, its failures and status board kept for the checks.
#pragma once

#include <doctest/doctest.h>

#include "supervisor_fixture.hpp"
#include "test_shard_paths.hpp"

namespace {

struct training_run : deterministic {
  std::shared_ptr<std::vector<std::string>> failures = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<status_board> board = std::make_shared<status_board>();

  // The training line of `sailor status`, once the board has been published again.
  std::string snapshot_line() {
    run_for(200ms);
    auto snap = board->snapshot();
    REQUIRE(snap);
    return snap->status.training_summary;
  }

  // Every plan trains 10 iterations; `resume` picks the newest complete checkpoint held.
  supervisor_options training(bool resume = true, int start = 0) {
    auto o = options(4);
    o.training_failure_grace = 200ms;
    o.assignment_deadline = 1s;
    o.startup_deadline = 1s;
    o.prepare_training = [resume, start](training_job& j, const checkpoint_holdings& held) {
      j.iterations = 10;
      j.start_iteration = start;
      if (resume) {
        auto from = held.newest();
        if (from.iterations > 0) {
          j.start_iteration = from.iterations;
          j.restore_dir = from.folder;
        }
      }
      return true;
    };
    o.on_training_error = [f = failures](const std::string& why) { f->push_back(why); };
    o.board = board;
    return o;
  }

  // A report of every rank of `node` in the current plan.
  void report_all(const std::string& node, report_kind kind, const std::string& phase,
                  std::int64_t iteration = 0) {
    int k = 0;
    for (auto& role : state().nodes.at(node).roles) {
      train_report r;
      r.plan_version = state().plan_version;
      r.node = node;
      r.rank = k++;
      r.stage = role.stage;
      r.replica = role.replica;
      r.tp_rank = role.tp_rank;
      r.kind = static_cast<std::int32_t>(kind);
      r.phase = phase;
      r.iteration = iteration;
      send(node, r);
    }
  }

  void send(const std::string& node, const train_report& r) {
    caf::anon_send(fakes.at(node), r);
    sched.run();
  }

  // `node` is killed (its connection drops).
  void lose(const std::string& node) {
    caf::anon_send_exit(fakes.at(node), caf::exit_reason::kill);
    sched.run();
  }

  // Four nodes train plan 1 through its first iteration (iteration 0).
  void four_nodes_through_first_iteration() {
    start(training());
    join_four();
    for (const auto& n : {"n1", "n2", "n3", "n4"})
      report_all(n, report_kind::reached, "setup");
    for (const auto& n : {"n1", "n2", "n3", "n4"})
      report_all(n, report_kind::iteration, "", 0);
  }

  // Every rank of plan 1 on `node` says it keeps its state after `iteration` completed
  // iterations in memory at `file` (or, with `error`, that it could not keep it).
  void report_kept(const std::string& node, int iteration, const std::string& file,
                   const std::string& error = {}, std::int64_t plan_version = 1) {
    for (std::size_t k = 0; k < state().nodes.at(node).roles.size(); ++k) {
      train_report kept;
      kept.plan_version = plan_version;
      kept.node = node;
      kept.rank = static_cast<int>(k);
      kept.kind = static_cast<std::int32_t>(report_kind::snapshot);
      kept.iteration = iteration;
      kept.checkpoint_file = error.empty() ? file : std::string{};
      kept.error = error;
      send(node, kept);
    }
  }

  // `node` is killed; every other node says that its ranks keep their state after
  // `iteration` completed iterations in memory at `file`.
  void lose_and_survivors_keep(const std::string& node, int iteration, const std::string& file) {
    lose(node);
    std::vector<std::string> survivors;
    for (auto& [name, n] : state().nodes)
      survivors.push_back(name);
    for (auto& n : survivors)
      report_kept(n, iteration, file);
  }

  train_report failure(const std::string& node, const std::string& phase, const std::string& why,
                       std::int64_t iteration = 0, const std::string& blamed = {}) {
    train_report r;
    r.plan_version = state().plan_version;
    r.node = node;
    r.kind = static_cast<std::int32_t>(report_kind::failed);
    r.phase = phase;
    r.error = why;
    r.iteration = iteration;
    r.blamed_node = blamed;
    return r;
  }
};

std::string shard(const std::string& folder, int iterations) {
  return sailor::testing::shard_path(folder, iterations, 0, 1, 6);
}

// Checkpoints after iterations 2 and 4 of plan 1, each complete on n1.
void held_checkpoints(training_run& t) {
  for (int it : {2, 4}) {
    train_report r;
    r.plan_version = 1;
    r.node = "n1";
    r.iteration = it - 1;
    r.checkpoint_file = shard("checkpoints/j/v1", it);
    t.send("n1", r);
  }
}

}  // namespace
