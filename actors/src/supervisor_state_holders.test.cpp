// Where the supervisor takes a plan's state from when nodes come and go while training:
// holders that leave with notice or die, survivors' memory and checkpoints together, growth,
// losses during a recovery, and the coordinator's kept checkpoint once every node is gone.
#include <algorithm>

#include <doctest/doctest.h>

#include "sailor/train/checkpoint_files.hpp"
#include "training_run_fixture.hpp"

TEST_CASE_FIXTURE(training_run, "supervisor: a node leaving with notice stops counting as a holder when its grace is over, and the shard it handed over stays held") {
  four_nodes_through_first_iteration();
  REQUIRE(state().plan_version == 1);
  // n4 gets a notice with 2.5 s left; the state only it held (a memory shard after iteration
  // 1) goes to n1, which reports it as handed over (no plan version: not a survivor's report).
  caf::anon_send(fakes.at("n4"), preempt_atom::value);
  sched.run();
  REQUIRE(state().recovery.leaving.count("n4") == 1);
  const auto file = shard("checkpoints/j/mem", 1);
  train_report kept;
  kept.plan_version = 1;
  kept.node = "n4";
  kept.kind = static_cast<std::int32_t>(report_kind::snapshot);
  kept.iteration = 1;
  kept.checkpoint_file = file;
  send("n4", kept);
  auto given = kept;
  given.plan_version = 0;
  given.node = "n1";
  given.rank = -1;
  given.phase = "handover";
  send("n1", given);
  auto held = state().holdings.newest();
  CHECK(held.iterations == 1);
  CHECK(held.holders.size() == 2);
  // Its grace period over, n4 is gone: a plan made now fetches from n1 alone.
  run_for(3s);
  CHECK(state().recovery.leaving.count("n4") == 0);
  held = state().holdings.newest();
  CHECK(held.iterations == 1);
  CHECK(held.folder == "checkpoints/j/mem");
  CHECK(held.holders == std::vector<std::string>{state().nodes.at("n1").inventory.address});
}

TEST_CASE_FIXTURE(training_run, "supervisor: a holder killed while the next plan fetches the survivors' state: the job is re-planned again from the state the others hold") {
  four_nodes_through_first_iteration();
  // n4 dies; the survivors keep their state after iteration 1 in memory and say so.
  const auto file = shard("checkpoints/j/mem", 1);
  lose_and_survivors_keep("n4", 1, file);
  REQUIRE(state().plan_version == 2);
  CHECK(logs.at("n2")->jobs.back().start_iteration == 1);
  CHECK(logs.at("n2")->jobs.back().restore_dir == "checkpoints/j/mem");
  for (const auto& n : {"n1", "n2", "n3"})
    report_all(n, report_kind::reached, "setup");
  // n1, a holder, dies while the others fetch from it; their restore fails on it.
  lose("n1");
  auto fetch_failed = failure("n2", "restore", "fetching the checkpoint after iteration 1: cannot "
                                             "fetch checkpoint shard " + file + " (n1:7000: "
                                             "disconnected)");
  fetch_failed.plan_version = 2;  // a rank of the plan the loss ended
  send("n2", fetch_failed);
  REQUIRE(state().plan_version == 3);
  CHECK_FALSE(state().nodes.count("n1"));
  // The next plan resumes where the last did, from the state n2 and n3 still hold.
  CHECK(logs.at("n2")->jobs.back().plan_version == 3);
  CHECK(logs.at("n2")->jobs.back().start_iteration == 1);
  CHECK(logs.at("n2")->jobs.back().restore_dir == "checkpoints/j/mem");
  auto held = state().holdings.newest();
  CHECK(held.iterations == 1);
  CHECK(std::find(held.holders.begin(), held.holders.end(), "n1:7000") == held.holders.end());
  CHECK(held.holders.size() == 2);
  for (const auto& n : {"n2", "n3"})
    report_all(n, report_kind::reached, "setup");
  for (const auto& n : {"n2", "n3"})
    report_all(n, report_kind::reached, "restore");
  for (const auto& n : {"n2", "n3"})
    report_all(n, report_kind::iteration, "", 1);
  run_for(400ms);
  CHECK(failures->empty());
  CHECK(state().training.completed_count() == 2);
}

namespace {

std::string shard_of(const std::string& folder, int iterations, int writer, int writers) {
  return sailor::testing::shard_path(folder, iterations, writer, writers, 3, "00000000000000cd");
}

}  // namespace

TEST_CASE_FIXTURE(training_run, "supervisor: survivors that hold some layers and a checkpoint of the same iteration that holds the others: the next plan takes both (state_source mixed)") {
  auto o = training();
  o.prepare_training = [](training_job& j, const checkpoint_holdings& held) {
    j.iterations = 10;
    auto from = held.newest();
    if (from.iterations > 0) {
      j.start_iteration = from.iterations;
      j.restore_dir = from.folder;
      j.restore_files = from.files;
      j.restore_holders = from.holders;
    }
    return true;
  };
  start(o);
  join_four();
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::reached, "setup");
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::iteration, "", 0);
  // n1 wrote the checkpoint of layers 3..5 after iteration 1 to its disk.
  train_report written;
  written.plan_version = 1;
  written.node = "n1";
  written.iteration = 0;
  written.checkpoint_file = shard_of("checkpoints/j/v1", 1, 1, 2);
  send("n1", written);
  // n4 dies; the survivors keep layers 0..2 after iteration 1 in memory (those of layers
  // 3..5 could not keep theirs).
  lose("n4");
  const auto kept_file = shard_of("checkpoints/j/mem", 1, 0, 2);
  for (const auto& n : {"n1", "n2", "n3"})
    report_kept(n, 1, kept_file, n == std::string{"n1"} ? "the state cannot be encoded" : "");
  REQUIRE(state().plan_version == 2);
  const auto& job = logs.at("n2")->jobs.back();
  CHECK(job.start_iteration == 1);
  CHECK(job.restore_dir == "checkpoints/j/mem");
  // Memory for layers 0..2 (from n2 and n3), n1's disk for layers 3..5.
  const auto& files = job.restore_files;
  CHECK(std::count(files.begin(), files.end(), kept_file) == 2);
  CHECK(std::count(files.begin(), files.end(), shard_of("checkpoints/j/v1", 1, 1, 2)) == 1);
  CHECK(state().recovery.record.state_source == "mixed");
  CHECK(state().recovery.record.lost_iterations == 0);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a rank whose fetch of the survivors' state fails on a holder that died, before its loss is noticed, names it: the job re-plans without it from the state the others hold") {
  four_nodes_through_first_iteration();
  const auto file = shard("checkpoints/j/mem", 1);
  lose_and_survivors_keep("n4", 1, file);
  REQUIRE(state().plan_version == 2);
  for (const auto& n : {"n1", "n2", "n3"})
    report_all(n, report_kind::reached, "setup");
  // n1, a holder, dies during the transfer; n2's fetch fails first and names it (its
  // heartbeats have not missed yet: the fake stays up).
  auto fetch_failed = failure("n2", "restore", "fetching the state after iteration 1: cannot "
                                             "fetch checkpoint shard " + file + " (n1:7000: "
                                             "disconnected)", 0, "n1");
  send("n2", fetch_failed);
  REQUIRE(state().plan_version == 3);
  CHECK_FALSE(state().nodes.count("n1"));
  // The state the others hold is not forgotten: the next plan resumes from it, no iteration lost.
  const auto& job = logs.at("n2")->jobs.back();
  CHECK(job.plan_version == 3);
  CHECK(job.start_iteration == 1);
  CHECK(job.restore_dir == "checkpoints/j/mem");
  CHECK(state().recovery.record.lost_iterations == 0);
  CHECK_FALSE(has_event("re-planning from an older checkpoint"));
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node that joins a running job: the ranks train on while the plan is made, then stop and keep their state, and the next plan takes it from their memory with no iteration lost") {
  four_nodes_through_first_iteration();
  join("n5", "a");
  // The plan over five nodes is made, and held: plan v1 stays current, its ranks are released
  // (an empty assignment of v1) and nobody has a job of the next plan yet.
  REQUIRE(state().plan_version == 1);
  for (const auto& n : {"n1", "n2", "n3", "n4"}) {
    INFO(n);
    REQUIRE_FALSE(logs.at(n)->assignments.empty());
    CHECK(logs.at(n)->assignments.back().plan_version == 1);
    CHECK(logs.at(n)->assignments.back().roles.empty());
  }
  CHECK(logs.at("n5")->jobs.empty());
  // An iteration the ranks completed before the release reached them still counts.
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    report_all(n, report_kind::iteration, "", 1);
  CHECK(state().training.completed_count() == 2);
  const auto file = shard("checkpoints/j/mem", 2);
  for (const auto& n : {"n1", "n2", "n3"})
    report_kept(n, 2, file);
  CHECK(state().plan_version == 1);  // n4's ranks have not reported yet
  report_kept("n4", 2, file);
  REQUIRE(state().plan_version == 2);
  // Every node, the new one too, resumes after the two iterations from the ranks' memory.
  for (const auto& n : {"n1", "n5"}) {
    INFO(n);
    REQUIRE_FALSE(logs.at(n)->jobs.empty());
    CHECK(logs.at(n)->jobs.back().plan_version == 2);
    CHECK(logs.at(n)->jobs.back().start_iteration == 2);
    CHECK(logs.at(n)->jobs.back().restore_dir == "checkpoints/j/mem");
  }
  const auto& r = state().recovery.record;
  CHECK(r.cause == "replan");
  CHECK(r.start_iteration == 2);
  CHECK(r.lost_iterations == 0);
  CHECK(r.state_source == "replicas");
}

TEST_CASE_FIXTURE(training_run, "supervisor: a node lost while the ranks of a plan stopped for growth keep their state: the next plan waits for the others only") {
  four_nodes_through_first_iteration();
  join("n5", "a");
  REQUIRE(state().plan_version == 1);
  const auto file = shard("checkpoints/j/mem", 1);
  for (const auto& n : {"n1", "n2", "n3"})
    report_kept(n, 1, file);
  // n4 dies before it reported: the plan made over five nodes is dropped for one without it.
  lose("n4");
  REQUIRE(state().plan_version == 2);
  CHECK_FALSE(state().nodes.count("n4"));
  CHECK(std::none_of(state().current->stages.begin(), state().current->stages.end(), [](const auto& s) {
    return std::any_of(s.replicas.begin(), s.replicas.end(), [](const auto& r) {
      return std::count(r.nodes.begin(), r.nodes.end(), "n4") > 0;
    });
  }));
  CHECK(logs.at("n5")->jobs.back().start_iteration == 1);
  CHECK(state().recovery.record.lost_iterations == 0);
}

TEST_CASE_FIXTURE(training_run, "supervisor: an iteration the survivors finished but a lost node never reported is settled from their reports, not skipped") {
  four_nodes_through_first_iteration();
  // Iteration 1: every rank but n4's reports it (n4 is killed after the iteration's last
  // collective, before its report); the last stage's loss comes from a surviving replica.
  int last_stage = 0;
  for (const auto& [name, node] : state().nodes)
    for (const auto& role : node.roles) last_stage = std::max(last_stage, role.stage);
  bool last_stage_survives = false;
  for (const auto& n : {"n1", "n2", "n3"})
    for (const auto& role : state().nodes.at(n).roles) {
      last_stage_survives = last_stage_survives || (role.stage == last_stage && role.tp_rank == 0);
      train_report r;
      r.plan_version = 1;
      r.node = n;
      r.stage = role.stage;
      r.replica = role.replica;
      r.tp_rank = role.tp_rank;
      r.kind = static_cast<std::int32_t>(report_kind::iteration);
      r.iteration = 1;
      r.loss = 2.5;
      send(n, r);
    }
  REQUIRE(last_stage_survives);
  CHECK(state().training.completed_count() == 1);  // n4's report is missing
  // The survivors' state includes iteration 1.
  lose_and_survivors_keep("n4", 2, shard("checkpoints/j/mem", 2));
  REQUIRE(state().plan_version == 2);
  CHECK(logs.at("n2")->jobs.back().start_iteration == 2);
  // Iteration 1 is counted, with the survivors' loss, and was not run again.
  CHECK(state().training.completed_count() == 2);
  const auto& done = state().training.completed();
  REQUIRE(done.size() == 2);
  CHECK(done[1].iteration == 1);
  CHECK(done[1].loss == doctest::Approx(2.5));
  CHECK(state().recovery.record.lost_iterations == 0);
}

TEST_CASE_FIXTURE(training_run, "supervisor: a second loss soon after a recovery waits for the survivors' state its own full time (the first wait's timer does not end it)") {
  four_nodes_through_first_iteration();
  // The first recovery: its wait's timer is due state_wait (5 s) from now.
  lose_and_survivors_keep("n4", 1, shard("checkpoints/j/mem", 1));
  REQUIRE(state().plan_version == 2);
  for (const char* step : {"setup", "restore"})
    for (const auto& n : {"n1", "n2", "n3"})
      report_all(n, report_kind::reached, step);
  for (const auto& n : {"n1", "n2", "n3"})
    report_all(n, report_kind::iteration, "", 1);
  run_for(4500ms);
  lose("n3");  // the second, 0.5 s before the first wait's timer
  run_for(1s);  // past the first timer, well within the second wait
  // The survivors have not reported yet: the next plan is still held for them (it used to go
  // on at the first timer, from an older checkpoint, and iterations were run again).
  CHECK(state().plan_version == 2);
  const auto second = shard("checkpoints/j/mem", 2);
  for (const auto& n : {"n1", "n2"})
    report_kept(n, 2, second, {}, 2);
  REQUIRE(state().plan_version == 3);
  CHECK(logs.at("n1")->jobs.back().start_iteration == 2);
  CHECK(logs.at("n1")->jobs.back().restore_dir == "checkpoints/j/mem");
  CHECK(state().recovery.record.lost_iterations == 0);
}

TEST_CASE_FIXTURE(training_run, "supervisor: every node lost, the coordinator keeps the checkpoint: nodes that come back one by one resume from it, and the recovery names the checkpoint") {
  four_nodes_through_first_iteration();
  // The coordinator's keeper holds the checkpoint after iteration 1 (train/checkpoint_keeper):
  // a holder that is not a node, never lost with one.
  const auto kept = shard("checkpoints/j/v1", 1);
  caf::anon_send(supervisor, keeper_holds_atom::value, kept, std::string{"coordinator:7100"});
  sched.run();
  for (const auto& n : {"n1", "n2", "n3", "n4"})
    lose(n);
  REQUIRE(state().nodes.empty());
  CHECK(state().recovery.active);  // the last node's loss begins the recovery
  join("n5", "a");
  run_for(1500ms);  // the settle time: a plan over n5 alone
  REQUIRE_FALSE(logs.at("n5")->jobs.empty());
  CHECK(logs.at("n5")->jobs.back().start_iteration == 1);
  CHECK(logs.at("n5")->jobs.back().restore_dir == "checkpoints/j/v1");
  // n6 joins once n5's ranks restored, before their first iteration: the growth re-plan takes
  // their memory, which holds what they restored.
  const auto first = state().plan_version;
  report_all("n5", report_kind::reached, "setup");
  report_all("n5", report_kind::reached, "restore");
  join("n6", "b");
  report_kept("n5", 1, shard("checkpoints/j/mem", 1), {}, first);
  REQUIRE(state().plan_version > first);
  REQUIRE_FALSE(logs.at("n6")->jobs.empty());
  CHECK(logs.at("n6")->jobs.back().restore_dir == "checkpoints/j/mem");
  const auto& r = state().recovery.record;
  CHECK(r.cause == "loss");
  CHECK(r.start_iteration == 1);
  CHECK(r.state_source == "checkpoint");
}
