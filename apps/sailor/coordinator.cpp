// `sailor coordinator`: runs the job supervisor that sailor-node processes join.
//
// With --train-dir, every plan is also trained: the nodes get a training job (the model, the
// job's seed and optimizer) before their roles, one line per completed iteration is printed,
// and a plan made after a node is lost resumes from the newest complete checkpoint the
// remaining nodes hold. Nodes share nothing but the network: their ranks meet through the
// coordinator's rendezvous store, and each node keeps its checkpoint shards in its own state
// folder and serves them to the others. The train dir is the coordinator's own folder.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.hpp"
#include "coordinator_search.hpp"
#include "run_summary.hpp"
#include "dashboard.hpp"
#include "job_token.hpp"
#include "exit_codes.hpp"
#include "sailor/config/text.hpp"
#include "training_setup.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"

namespace sailor::app {
namespace {

struct coordinator_args {
  std::string listen = "127.0.0.1:7100";
  std::string cluster, model, job;
  int quorum = 0;
  double settle_s = 5;
  int heartbeat_ms = 500;
  int heartbeat_timeout_ms = 2000;
  std::string transport = "tcp";
  std::string token_file;
  comm::transport_options::tls_files tls;
  std::string planner = "even";
  std::string sailor_data;
  std::string profile, profile_cache;  ///< --planner search: a profile file, the cache folder
  std::string train_dir;     ///< empty: control plane only
  int iterations = 0;        ///< 0: the job's
  int checkpoint_every = 1;
  double peer_timeout_s = 60;
  double startup_deadline_s = 0;  ///< 0: twice --peer-timeout-s, at least 60 s
  bool exit_when_done = false;
  bool emulate_links = false;
  std::string summary_json;  ///< empty: none
  dashboard_args dashboard;
};

int run_coordinator(const coordinator_args& args) {
  auto where = comm::address::parse(args.listen);
  if (!where) {
    std::fprintf(stderr, "sailor coordinator: --listen: %s\n", where.error().message.c_str());
    return exit_bad_input;
  }
  auto cluster = config::load_cluster(args.cluster);
  if (!cluster) {
    std::fprintf(stderr, "sailor coordinator: %s\n", cluster.error().to_string().c_str());
    return exit_bad_input;
  }
  auto model = config::load_model(args.model);
  if (!model) {
    std::fprintf(stderr, "sailor coordinator: %s\n", model.error().to_string().c_str());
    return exit_bad_input;
  }
  auto job = config::load_job(args.job);
  if (!job) {
    std::fprintf(stderr, "sailor coordinator: %s\n", job.error().to_string().c_str());
    return exit_bad_input;
  }
  if (args.heartbeat_ms <= 0 || args.heartbeat_timeout_ms <= args.heartbeat_ms) {
    std::fprintf(stderr, "sailor coordinator: --heartbeat-timeout-ms must exceed "
                         "--heartbeat-ms > 0\n");
    return exit_bad_input;
  }
  // Signals are taken by sigwait below, not by handlers: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // training finished or failed (--exit-when-done)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto token = job_token(args.token_file, true, "sailor coordinator");
  if (!token) {
    std::fprintf(stderr, "sailor coordinator: %s\n", token.error().to_string().c_str());
    return 2;
  }
  auto transport = actors::make_transport(args.transport, "coordinator", "", *token, where->host,
                                          args.tls);
  if (!transport) {
    std::fprintf(stderr, "sailor coordinator: %s\n", transport.error().message.c_str());
    return exit_bad_input;
  }
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  actors::coordinator_options options;
  options.transport = transport->get();
  options.host = where->host;
  options.port = where->port;
  for (auto& z : cluster->zones)
    options.supervisor.zones.push_back(z.name);
  options.supervisor.quorum = args.quorum;
  options.supervisor.settle =
    std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(args.settle_s));
  options.supervisor.heartbeat_interval = std::chrono::milliseconds{args.heartbeat_ms};
  options.supervisor.heartbeat_timeout = std::chrono::milliseconds{args.heartbeat_timeout_ms};
  options.supervisor.model_layers = model->num_all_layers();  // a plan must cover them all
  if (args.planner == "sailor") {
    // Sailor's planner needs per-layer profiles of the GPU types that join.
    if (args.sailor_data.empty()) {
      std::fprintf(stderr, "sailor coordinator: --planner sailor needs --sailor-data DIR\n");
      return exit_bad_input;
    }
    auto name = model->sailor_name.empty() ? model->name : model->sailor_name;
    auto data = config::load_sailor_data(args.sailor_data, name);
    if (!data) {
      std::fprintf(stderr, "sailor coordinator: %s\n", data.error().to_string().c_str());
      return exit_bad_input;
    }
    planner::problem prob;
    prob.model = *model;
    prob.profile = data->profile;
    prob.network = data->network;
    prob.cluster = *cluster;
    prob.job = *job;
    options.plan = actors::sailor_planning(std::move(prob));
  } else if (args.planner == "search") {
    auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "sailor-node";
    coordinator_search_inputs in{*model, *cluster, *job, args.model, args.profile,
                                 args.profile_cache,
                                 access(self.c_str(), X_OK) == 0 ? self.string() : "",
                                 args.train_dir.empty() ? std::filesystem::temp_directory_path().string()
                                                        : args.train_dir,
                                 !args.train_dir.empty()};
    auto search = coordinator_search(std::move(in));
    if (!search) {
      std::fprintf(stderr, "sailor coordinator: --profile: %s\n", search.error().to_string().c_str());
      return exit_bad_input;
    }
    options.plan = std::move(*search);
  } else if (args.planner == "even") {
    // Needs no profiles (CPU nodes have none): layers split evenly, one pipeline per device
    // group of a zone.
    int layers = model->num_all_layers();
    int batch = job->global_batch;
    const bool training = !args.train_dir.empty();
    options.plan = [layers, batch, training, shape = *model, pool = *cluster,
                    job_cfg = *job](const actors::plan_request& request) -> result<config::plan> {
      auto p = actors::even_plan(request.nodes, layers, batch);
      if (!p || !training)
        return p;
      // Refused before training starts: a model that does not fit a device's memory.
      if (auto why = memory_refusal(shape, *p, pool, job_cfg); !why.empty())
        return sailor::error{error_kind::invalid_input,
                             "the model does not fit a device's memory: " + why, "", 0, "plan"};
      return p;
    };
  } else {
    std::fprintf(stderr, "sailor coordinator: --planner: expected even, search or sailor, got '%s'\n",
                 args.planner.c_str());
    return exit_bad_input;
  }
  std::atomic<int> outcome{0};  // 0 running, 1 finished, 2 failed
  run_summary summary;
  if (!args.train_dir.empty()) {
    if (args.checkpoint_every < 0 || args.peer_timeout_s <= 0) {
      std::fprintf(stderr, "sailor coordinator: --checkpoint-every must be 0 (never) or more and "
                           "--peer-timeout-s positive\n");
      return exit_bad_input;
    }
    const int iterations = args.iterations > 0 ? args.iterations : job->iterations;
    if (iterations <= 0) {
      std::fprintf(stderr, "sailor coordinator: --train-dir needs --iterations N or "
                           "'iterations' in the job file %s\n",
                   args.job.c_str());
      return exit_bad_input;
    }
    // The data file and the architecture, before anything is planned (the nodes read the
    // file at the same path).
    if (auto err = check_training_inputs(*model, *job, args.job)) {
      std::fprintf(stderr, "sailor coordinator: %s\n", err->to_string().c_str());
      return exit_bad_input;
    }
    std::error_code ec;
    std::filesystem::create_directories(args.train_dir, ec);
    if (ec) {
      std::fprintf(stderr, "sailor coordinator: --train-dir %s: %s\n", args.train_dir.c_str(),
                   ec.message().c_str());
      return exit_bad_input;
    }
    training_settings settings;
    settings.model = *model;
    settings.job = *job;
    settings.work_dir = std::filesystem::absolute(args.train_dir).string();
    settings.iterations = iterations;
    settings.checkpoint_every = args.checkpoint_every;
    settings.timeout_ms = static_cast<std::int64_t>(args.peer_timeout_s * 1000);
    const double deadline_s = args.startup_deadline_s > 0
                                ? args.startup_deadline_s
                                : std::max(60.0, 2 * args.peer_timeout_s);
    options.supervisor.startup_deadline =
      std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(deadline_s));
    options.supervisor.assignment_deadline = options.supervisor.startup_deadline;
    if (args.emulate_links)
      settings.links = cluster->links;
    const bool exit_when_done = args.exit_when_done;
    options.supervisor.prepare_training = [settings, &summary, &outcome, exit_when_done](
                                            actors::training_job& tj,
                                            const actors::checkpoint_holdings& held) {
      if (!fill_training_job(tj, settings, held)) {
        std::printf("plan v%lld: training already complete (%d iterations)\n",
                    static_cast<long long>(tj.plan_version), settings.iterations);
        std::fflush(stdout);
        // Nothing left to train is a finish: waiting for iterations would wait for ever.
        outcome = 1;
        if (exit_when_done)
          kill(getpid(), SIGUSR1);
        return false;
      }
      std::printf("plan v%lld: %s; training iterations %d..%d%s\n",
                  static_cast<long long>(tj.plan_version), actors::describe_plan(tj.plan).c_str(),
                  tj.start_iteration + 1, tj.iterations,
                  tj.start_iteration > 0 ? " (resumed from the checkpoint)" : "");
      // A prediction without a profile is the catalog's peak FLOP/s times an efficiency: say so.
      if (auto basis = actors::estimate_basis(tj.plan); !basis.empty())
        std::printf("plan v%lld: predicted %.4f s per iteration, %s\n",
                    static_cast<long long>(tj.plan_version), tj.predicted_iteration_s,
                    basis.c_str());
      std::fflush(stdout);
      summary.on_plan(tj.plan_version, tj.start_iteration, tj.predicted_iteration_s);
      return true;
    };
    options.supervisor.on_recovery = [&summary](const actors::recovery_record& r) {
      std::printf("plan v%lld recovered in %.3f s: state from %s (%lld bytes), %d completed "
                  "iterations run again\n",
                  static_cast<long long>(r.plan_version), r.total_s, r.state_source.c_str(),
                  static_cast<long long>(r.bytes_restored), r.lost_iterations);
      std::fflush(stdout);
      summary.on_recovery(r);
    };
    options.supervisor.on_iteration = [&outcome, &summary, exit_when_done](
                                        const actors::iteration_record& r,
                                        const actors::training_progress& p) {
      summary.on_iteration(r, p);
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
        outcome = 1;
        if (exit_when_done)
          kill(getpid(), SIGUSR1);
      }
      std::fflush(stdout);
    };
    options.supervisor.on_training_error = [&outcome, exit_when_done](const std::string& why) {
      std::printf("training failed: %s\n", why.c_str());
      std::fflush(stdout);
      outcome = 2;
      if (exit_when_done)
        kill(getpid(), SIGUSR1);
    };
  } else if (args.exit_when_done) {
    std::fprintf(stderr, "sailor coordinator: --exit-when-done needs --train-dir\n");
    return exit_bad_input;
  } else {
    options.supervisor.mode_note = "control plane only (no --train-dir): plans are made and "
                                   "roles assigned, nothing is trained";
  }
  auto board = std::make_shared<actors::status_board>();
  options.supervisor.board = board;
  const std::string options_note = options.supervisor.mode_note;
  auto coordinator = actors::coordinator::start(system, std::move(options));
  if (!coordinator) {
    std::fprintf(stderr, "sailor coordinator: %s\n", coordinator.error().message.c_str());
    return exit_unavailable;
  }
  auto dashboard = start_dashboard(args.dashboard, board, *cluster, *model);
  if (!dashboard) {
    std::fprintf(stderr, "sailor coordinator: %s\n", dashboard.error().message.c_str());
    return exit_bad_input;
  }
  std::printf("sailor coordinator: listening on %s:%u over %s (cluster %s: %s; model %s)\n",
              where->host.c_str(), static_cast<unsigned>((*coordinator)->port()),
              args.transport.c_str(), cluster->name.c_str(),
              count_of(static_cast<long long>(cluster->zones.size()), "zone").c_str(),
              model->name.c_str());
  if (*dashboard)
    std::printf("sailor coordinator: dashboard on %s\n", (*dashboard)->url().c_str());
  if (args.train_dir.empty())
    std::printf("sailor coordinator: %s\n", options_note.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  // SIGUSR1 is our own: training finished or failed, which is already said.
  if (sig != SIGUSR1)
    log::get("actors")->info("[coordinator] {}: shutting down", sig == SIGINT ? "interrupted" : "terminated");
  dashboard->reset();
  coordinator->reset();
  if (!args.summary_json.empty() && !args.train_dir.empty())
    if (auto err = summary.write(args.summary_json)) {
      std::fprintf(stderr, "sailor coordinator: %s\n", err->message.c_str());
      return exit_failed;
    }
  return outcome == 2 ? exit_failed : exit_done;
}

}  // namespace

void add_coordinator(CLI::App& app, command_set& commands) {
  auto args = std::make_shared<coordinator_args>();
  auto* sub = app.add_subcommand("coordinator", "run the job supervisor that sailor-node "
                                                "processes join");
  sub->add_option("--listen", args->listen, "HOST:PORT to accept nodes on (port 0: any)")
    ->capture_default_str();
  sub->add_option("--cluster", args->cluster, "cluster YAML (zones, GPUs, links)")->required();
  sub->add_option("--model", args->model, "model YAML")->required();
  sub->add_option("--job", args->job, "job YAML")->required();
  sub->add_option("--quorum", args->quorum, "plan as soon as this many nodes joined (0: "
                                            "settle time only)")
    ->check(non_negative_number())
    ->capture_default_str();
  sub->add_option("--settle-s", args->settle_s, "plan this long after the first node joined")
    ->check(non_negative_number())
    ->capture_default_str();
  sub->add_option("--heartbeat-ms", args->heartbeat_ms, "heartbeat interval of the nodes")
    ->check(positive_number())
    ->capture_default_str();
  sub->add_option("--heartbeat-timeout-ms", args->heartbeat_timeout_ms,
                  "a node silent this long is lost")
    ->check(positive_number())
    ->capture_default_str();
  sub->add_option("--planner", args->planner,
                  "even (no profiles needed), search (the planner's search on --profile, profiles measured "
                  "here and the catalog) or sailor (Sailor's planner; needs --sailor-data)")
    ->capture_default_str();
  sub->add_option("--profile", args->profile,
                  "--planner search: a profile JSON of the model (`sailor profile`, the demo's "
                  "cache); CPU types without one are profiled on this machine");
  sub->add_option("--profile-cache", args->profile_cache,
                  "--planner search: folder where profiles measured here are cached by device "
                  "type, model and build");
  sub->add_option("--sailor-data", args->sailor_data,
                  "a Sailor data folder with profiles of the model (for --planner sailor)");
  sub->add_option("--train-dir", args->train_dir,
                  "train every plan; the coordinator's own folder for the job (nodes keep "
                  "their checkpoint shards in their own --state-dir and serve them to each "
                  "other; a re-plan resumes from the newest complete checkpoint the remaining "
                  "nodes hold)");
  sub->add_option("--summary-json", args->summary_json,
                  "with --train-dir: write the run's summary here at exit (the fields of "
                  "`sailor demo --summary-json`: iterations_completed, loss_curve, replans, "
                  "recovery_s, tokens_per_s, predicted_iteration_s, measured_iteration_s)");
  sub->add_option("--iterations", args->iterations,
                  "training iterations (default: the job file's 'iterations')")
    ->check(positive_number());
  sub->add_option("--checkpoint-every", args->checkpoint_every,
                  "checkpoint every this many iterations (0: never; a re-plan then starts "
                  "afresh)")
    ->capture_default_str();
  sub->add_option("--peer-timeout-s", args->peer_timeout_s,
                  "bound on a rank's wait for a peer")
    ->check(positive_number())
    ->capture_default_str();
  sub->add_option("--startup-deadline-s", args->startup_deadline_s,
                  "bound on each step of starting a plan (roles ready, rendezvous and model, "
                  "restore, first iteration); a node that misses it is dropped and the job "
                  "re-planned (default: twice --peer-timeout-s, at least 60)")
    ->check(non_negative_number());
  sub->add_flag("--emulate-links", args->emulate_links,
                "hold transfers and all-reduces that cross zones for the cluster's link "
                "latency and bandwidth (for nodes that share one machine)");
  sub->add_flag("--exit-when-done", args->exit_when_done,
                "exit once training finished (code 0) or failed (code 1)");
  sub->add_option("--transport", args->transport,
                  "tcp or ucx (UCX ports must not face untrusted networks, see the README)")
    ->capture_default_str();
  add_dashboard_options(sub, args->dashboard);
  add_token_option(sub, args->token_file);
  add_tls_options(sub, args->tls);
  sub->callback([&commands, args] {
    commands.selected = [args] { return run_coordinator(*args); };
  });
}

}  // namespace sailor::app
