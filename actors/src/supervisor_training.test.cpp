// The supervisor's side of training under the deterministic scheduler: failures reported as
// their own kind, the start-up steps of a plan and their deadlines, restore fallbacks and
// checkpoint write failures. The nodes are fake actors; their ranks' reports are sent from
// their own endpoints.
#include <doctest/doctest.h>

#include "supervisor_fixture.hpp"
#include "sailor/train/checkpoint_files.hpp"
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

}  // namespace

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

TEST_CASE_FIXTURE(training_run, "supervisor: a rank of a resumed plan that fails before its first iteration fails the job") {
  start(training(false, 5));
  join_four();
  REQUIRE(state().plan_version == 1);
  REQUIRE(state().training.start_iteration() == 5);
  send("n2", failure("n2", "setup", "communicators: rendezvous timed out"));
  run_for(400ms);
  REQUIRE(failures->size() == 1);
  CHECK(failures->front().find("rendezvous timed out") != std::string::npos);
  CHECK(failures->front().find("n2") != std::string::npos);
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
  for (int it : {2, 4}) {
    train_report r;
    r.plan_version = 1;
    r.node = "n1";
    r.iteration = it - 1;
    r.checkpoint_file = shard("checkpoints/j/v1", it);
    send("n1", r);
  }
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
