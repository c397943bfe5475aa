// The supervisor tells the nodes of the running plan which checkpoint their writers must keep
// (checkpoint_kept): the newest that the loss of any one whole stage leaves complete, the
// copies of each stage's shards on other stages counted. Under the deterministic scheduler;
// the nodes are fake actors, their ranks' reports sent from their own endpoints.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <set>

#include "supervisor_fixture.hpp"
#include "test_shard_paths.hpp"

namespace {

struct checkpoint_run : deterministic {
  // Every plan trains 10 iterations from scratch and writes checkpoints to its own folder.
  supervisor_options training() {
    auto o = options(4);
    o.assignment_deadline = 1s;
    o.startup_deadline = 1s;
    o.prepare_training = [](training_job& j, const checkpoint_holdings&) {
      j.iterations = 10;
      j.checkpoint_dir = "checkpoints/j/v" + std::to_string(j.plan_version);
      return true;
    };
    return o;
  }

  void send(const std::string& node, const train_report& r) {
    caf::anon_send(fakes.at(node), r);
    sched.run();
  }
};

// The file of writer `writer` of `writers` (one per stage) in checkpoint `iterations` of
// `folder`.
std::string stage_shard(const std::string& folder, int iterations, int writer, int writers) {
  return sailor::testing::shard_path(folder, iterations, writer, writers, 1, "00000000000000cd");
}

}  // namespace

TEST_CASE_FIXTURE(checkpoint_run, "supervisor: the plan's nodes are told the newest checkpoint a lost stage leaves complete, only when it advances") {
  start(training());
  join_four();
  REQUIRE(state().plan_version == 1);
  const std::string v1 = "checkpoints/j/v1";
  // The writer of each stage (replica 0, TP rank 0), and a node outside the stage, which
  // holds the copies of its shards.
  std::map<int, std::set<std::string>> stage_nodes;
  std::map<int, std::string> writer;
  std::vector<std::string> plan_nodes;
  for (auto& [name, node] : state().nodes) {
    if (!node.roles.empty())
      plan_nodes.push_back(name);
    for (auto& role : node.roles) {
      stage_nodes[role.stage].insert(name);
      if (role.replica == 0 && role.tp_rank == 0)
        writer[role.stage] = name;
    }
  }
  const int stages = static_cast<int>(stage_nodes.size());
  REQUIRE(stages >= 2);  // the fixture's even plan over four nodes has four, two replicas each
  REQUIRE(static_cast<int>(writer.size()) == stages);
  // Written by stage `stage`'s writer once in place (its own report), or copied to a node
  // outside the stage (phase "copy", as node_recovery.cpp's handover_report says it).
  auto written = [&](int iterations) {
    for (int stage = 0; stage < stages; ++stage) {
      train_report r;
      r.plan_version = 1;
      r.node = writer.at(stage);
      r.iteration = iterations - 1;
      r.checkpoint_file = stage_shard(v1, iterations, stage, stages);
      send(r.node, r);
    }
  };
  auto copied = [&](int stage, int iterations) {
    train_report r;
    r.kind = static_cast<std::int32_t>(report_kind::snapshot);
    r.phase = "copy";
    r.rank = -1;
    for (const auto& n : plan_nodes)
      if (!stage_nodes.at(stage).count(n))
        r.node = n;
    REQUIRE_FALSE(r.node.empty());
    r.checkpoint_file = stage_shard(v1, iterations, stage, stages);
    send(r.node, r);
  };
  auto told = [&] {
    std::vector<int> out;
    for (const auto& k : logs.at(plan_nodes.front())->kept) {
      CHECK(k.plan_version == 1);
      CHECK(k.folder == v1);
      out.push_back(k.iterations);
    }
    for (const auto& n : plan_nodes)
      CHECK(logs.at(n)->kept.size() == out.size());  // every node of the plan, the same
    return out;
  };
  written(2);
  written(4);
  // Complete across stages after 4, but a lost stage would take its only shards of it.
  CHECK(state().holdings.newest().iterations == 4);
  CHECK(told().empty());
  for (int stage = 0; stage + 1 < stages; ++stage)
    copied(stage, 2);
  CHECK(told().empty());  // the last stage's shard of 2 has no copy yet
  copied(stages - 1, 2);
  CHECK(told() == std::vector<int>{2});
  written(6);
  for (int stage = 1; stage < stages; ++stage)
    copied(stage, 4);
  CHECK(told() == std::vector<int>{2});  // the copies lag: stage 0's shard of 4 has none yet
  copied(0, 4);
  CHECK(told() == std::vector<int>{2, 4});
  copied(0, 4);  // reported again
  written(8);
  CHECK(told() == std::vector<int>{2, 4});
  for (int stage = 0; stage < stages; ++stage)
    copied(stage, 6);
  CHECK(told() == std::vector<int>{2, 4, 6});
  // A stage lost now resumes from what was told, and the holdings still have it.
  CHECK(state().holdings.newest(v1).iterations == 8);
  // Another plan folder's shards (an older plan's) do not count for this plan.
  train_report old;
  old.plan_version = 1;
  old.node = writer.at(0);
  for (int stage = 0; stage < stages; ++stage) {
    old.checkpoint_file = stage_shard("checkpoints/j/v0", 10, stage, stages);
    send(old.node, old);
  }
  CHECK(told() == std::vector<int>{2, 4, 6});
  run_for(400ms);
  CHECK(state().plan_version == 1);
}

