// `sailor coordinator --train-dir`: the training job every plan runs, and the supervisor's
// callbacks that print the run's life (one line per plan, recovery and iteration) and gather
// its summary. The callbacks run on the supervisor's thread; --exit-when-done wakes main's
// sigwait with SIGUSR1.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "coordinator_drift.hpp"
#include "coordinator_parts.hpp"
#include "exit_codes.hpp"
#include "training_setup.hpp"
#include "sailor/actors/job_journal.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/comm/auth.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"

namespace sailor::app {
namespace {

// Training finished (1) or failed (2).
void finish(coordinator_outcome& outcome, int state, bool exit_when_done) {
  outcome.state = state;
  if (exit_when_done)
    kill(getpid(), SIGUSR1);
}

// The checks of --train-dir's options and files; the settings every training job is made of.
int training_settings_of(const coordinator_args& args, const coordinator_inputs& in,
                         training_settings& settings) {
  if (args.checkpoint_every < 0 || args.peer_timeout_s <= 0) {
    std::fprintf(stderr, "sailor coordinator: --checkpoint-every must be 0 (never) or more and "
                         "--peer-timeout-s positive\n");
    return exit_bad_input;
  }
  const int iterations = args.iterations > 0 ? args.iterations : in.job.iterations;
  if (iterations <= 0) {
    std::fprintf(stderr, "sailor coordinator: --train-dir needs --iterations N or "
                         "'iterations' in the job file %s\n",
                 args.job.c_str());
    return exit_bad_input;
  }
  // The data file and the architecture, before anything is planned (the nodes read the file
  // at the same path).
  if (auto err = check_training_inputs(in.model, in.job, args.job)) {
    std::fprintf(stderr, "sailor coordinator: %s\n", err->to_string().c_str());
    return exit_bad_input;
  }
  if (auto err = files::make_private_folder(args.train_dir)) {
    std::fprintf(stderr, "sailor coordinator: --train-dir: %s\n", err->message.c_str());
    return exit_bad_input;
  }
  settings.model = in.model;
  settings.job = in.job;
  settings.work_dir = std::filesystem::absolute(args.train_dir).string();
  settings.iterations = iterations;
  settings.checkpoint_every = args.checkpoint_every;
  settings.timeout_ms = static_cast<std::int64_t>(args.peer_timeout_s * 1000);
  if (args.emulate_links)
    settings.links = in.cluster.links;
  return exit_done;
}

// A journal write that fails is said, and training goes on: a coordinator restarted later
// would not know what was lost.
void journal_said(const status& err) {
  if (err)
    log::get("actors")->warn("[coordinator] {}: a coordinator restarted on this job will not "
                             "know of it", err->message);
}

// The plan, in the journal before the nodes are told of it.
void journal_plan(coordinator_outcome& outcome, const actors::training_job& tj) {
  if (outcome.journal)
    journal_said(outcome.journal->plan(
      {tj.plan_version, tj.start_iteration, tj.peer_nodes, config::to_yaml(tj.plan)}));
}

// --train-dir/journal: opened (refused when it is another job's or does not parse), and what
// an earlier coordinator of the job did handed to the supervisor and the summary.
int open_journal(training_settings& settings, const std::string& token,
                 actors::supervisor_options& supervisor, coordinator_outcome& outcome) {
  const auto path = (std::filesystem::path{settings.work_dir} / "journal").string();
  actors::journal_contents earlier;
  auto journal = actors::job_journal::open(
    path, {job_key(settings), settings.model.name, comm::token_digest(token)}, earlier);
  if (!journal) {
    std::fprintf(stderr, "sailor coordinator: %s\n", journal.error().to_string().c_str());
    return exit_bad_input;
  }
  outcome.journal = std::move(*journal);
  supervisor.refuse_unknown_plans = true;
  if (earlier.plan_version() <= 0)
    return exit_done;
  actors::resumed_job resumed;
  resumed.plan_version = earlier.plan_version();
  const int done = earlier.completed();
  resumed.completed.assign(earlier.iterations.begin(), earlier.iterations.begin() + done);
  resumed.initial_val_loss = earlier.initial_val_loss;
  supervisor.resumed = resumed;
  settings.journal_bound = std::make_shared<std::atomic<int>>(done);
  outcome.summary.continue_from(earlier);
  std::printf("sailor coordinator: continuing the job of %s: plan v%lld was its last, %d "
              "iterations completed%s%s\n",
              path.c_str(), static_cast<long long>(resumed.plan_version), done,
              earlier.checkpoint_iterations > 0
                ? (", the nodes told to keep the checkpoint after iteration " +
                   std::to_string(earlier.checkpoint_iterations) + " (" + earlier.checkpoint_folder + ")")
                    .c_str()
                : "",
              earlier.cut ? " (its last record was cut short and is dropped)" : "");
  std::fflush(stdout);
  return exit_done;
}

// Fills each plan's training job and prints the plan and its prediction.
std::function<bool(actors::training_job&, const actors::checkpoint_holdings&)> plan_starter(
  training_settings settings, coordinator_outcome& outcome, bool exit_when_done) {
  return [settings = std::move(settings), &outcome, exit_when_done](
           actors::training_job& tj, const actors::checkpoint_holdings& held) {
    if (!fill_training_job(tj, settings, held)) {
      std::printf("plan v%lld: training already complete (%d iterations)\n",
                  static_cast<long long>(tj.plan_version), settings.iterations);
      std::fflush(stdout);
      // Nothing left to train is a finish: waiting for iterations would wait for ever.
      finish(outcome, 1, exit_when_done);
      return false;
    }
    // Where the state comes from: the survivors' memory, the checkpoint (or copies of its
    // shards on other nodes), or both.
    const auto source = actors::state_source(tj.start_iteration, tj.restore_dir, tj.restore_files);
    const auto resumed =
      tj.start_iteration > 0 ? " (resumed from " + actors::state_source_words(source) + ")" : "";
    std::printf("plan v%lld: %s; training iterations %d..%d%s\n",
                static_cast<long long>(tj.plan_version), actors::describe_plan(tj.plan).c_str(),
                tj.start_iteration + 1, tj.iterations, resumed.c_str());
    // A prediction without a profile is the catalog's peak FLOP/s times an efficiency: say so.
    if (auto basis = actors::estimate_basis(tj.plan); !basis.empty())
      std::printf("plan v%lld: predicted %.4f s per iteration, %s\n",
                  static_cast<long long>(tj.plan_version), tj.predicted_iteration_s, basis.c_str());
    else if (tj.predicted_iteration_s > 0)
      std::printf("plan v%lld: predicted %.4f s per iteration by the simulator on the profile\n",
                  static_cast<long long>(tj.plan_version), tj.predicted_iteration_s);
    std::fflush(stdout);
    outcome.summary.on_plan(tj.plan_version, tj.start_iteration, tj.predicted_iteration_s);
    journal_plan(outcome, tj);
    return true;
  };
}

// One line per completed iteration; the last one says training finished.
void print_iteration(const actors::iteration_record& r, const actors::training_progress& p) {
  std::printf("iteration %lld/%d  loss %.6f  measured %.4f s  tokens/s %.0f",
              static_cast<long long>(r.iteration + 1), p.iterations(), r.loss, r.measured_s,
              r.measured_s > 0 ? static_cast<double>(r.tokens) / r.measured_s : 0.0);
  if (p.predicted_s() > 0)
    std::printf("  predicted %.4f s", p.predicted_s());
  if (r.val_loss)
    std::printf("  validation loss %.6f", *r.val_loss);
  std::printf("\n");
  if (p.finished()) {
    auto curve = p.loss_curve();
    std::printf("training finished: %d iterations, loss %.6f -> %.6f\n", p.completed_count(),
                curve.front(), curve.back());
  }
  std::fflush(stdout);
}

}  // namespace

int setup_training(const coordinator_args& args, const coordinator_inputs& in,
                   const std::string& token, actors::supervisor_options& supervisor,
                   coordinator_outcome& outcome) {
  if (args.train_dir.empty()) {
    if (args.exit_when_done) {
      std::fprintf(stderr, "sailor coordinator: --exit-when-done needs --train-dir\n");
      return exit_bad_input;
    }
    supervisor.mode_note = "control plane only (no --train-dir): plans are made and roles "
                           "assigned, nothing is trained";
    return exit_done;
  }
  training_settings settings;
  if (int code = training_settings_of(args, in, settings); code != exit_done)
    return code;
  if (int code = open_journal(settings, token, supervisor, outcome); code != exit_done)
    return code;
  const double deadline_s = args.startup_deadline_s > 0 ? args.startup_deadline_s
                                                        : std::max(60.0, 2 * args.peer_timeout_s);
  supervisor.startup_deadline =
    std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(deadline_s));
  supervisor.assignment_deadline = supervisor.startup_deadline;
  const bool exit_when_done = args.exit_when_done;
  const auto journal_bound = settings.journal_bound;
  auto starter = plan_starter(std::move(settings), outcome, exit_when_done);
  supervisor.prepare_training = [starter, drift = in.drift](actors::training_job& tj,
                                                            const actors::checkpoint_holdings& held) {
    if (!starter(tj, held))
      return false;
    drift->plan_started(tj);
    return true;
  };
  supervisor.on_recovery = [&outcome](const actors::recovery_record& r) {
    if (outcome.journal)
      journal_said(outcome.journal->recovery(r));
    const char* what = r.cause == "replan"                ? "took over from the running ranks"
                       : r.cause == "coordinator_restart" ? "took over after the coordinator restarted"
                                                          : "recovered";
    std::printf("plan v%lld %s in %.3f s: state from %s (%lld bytes), %d completed "
                "iterations run again\n",
                static_cast<long long>(r.plan_version), what, r.total_s,
                r.state_source.c_str(),
                static_cast<long long>(r.bytes_restored), r.lost_iterations);
    std::fflush(stdout);
    outcome.summary.on_recovery(r);
  };
  supervisor.on_iteration = [&outcome, exit_when_done, drift = in.drift,
                             bound = journal_bound](const actors::iteration_record& r,
                                                             const actors::training_progress& p) {
    if (bound)
      bound->store(-1);  // this coordinator's own iterations now: no bound on the next plans
    drift->iteration(r, p);
    if (outcome.journal) {
      if (p.initial_val_loss() && r.iteration == p.start_iteration() && p.start_iteration() == 0)
        journal_said(outcome.journal->initial_validation(*p.initial_val_loss()));
      journal_said(outcome.journal->iteration(r));
      if (p.finished())
        journal_said(outcome.journal->sync());
    }
    outcome.summary.on_iteration(r, p);
    print_iteration(r, p);
    if (p.finished())
      finish(outcome, 1, exit_when_done);
  };
  supervisor.on_checkpoint_kept = [&outcome](const actors::checkpoint_kept& kept) {
    if (outcome.journal)
      journal_said(outcome.journal->checkpoint(kept.iterations, kept.folder));
  };
  supervisor.on_training_error = [&outcome, exit_when_done](const std::string& why) {
    std::printf("training failed: %s\n", why.c_str());
    std::fflush(stdout);
    finish(outcome, 2, exit_when_done);
  };
  return exit_done;
}

}  // namespace sailor::app
