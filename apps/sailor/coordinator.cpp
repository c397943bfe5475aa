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

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "coordinator_drift.hpp"
#include "coordinator_parts.hpp"
#include "link_probes.hpp"
#include "dashboard.hpp"
#include "job_metrics.hpp"
#include "job_token.hpp"
#include "exit_codes.hpp"
#include "sailor/config/text.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"

namespace sailor::app {
namespace {

// The listening address and the config files, loaded and checked.
int load_inputs(const coordinator_args& args, coordinator_inputs& in) {
  auto where = comm::address::parse(args.listen);
  if (!where) {
    std::fprintf(stderr, "sailor coordinator: --listen: %s\n", where.error().message.c_str());
    return exit_bad_input;
  }
  in.listen = *where;
  auto cluster = config::load_cluster(args.cluster);
  if (!cluster) {
    std::fprintf(stderr, "sailor coordinator: %s\n", cluster.error().to_string().c_str());
    return exit_bad_input;
  }
  in.cluster = std::move(*cluster);
  auto model = config::load_model(args.model);
  if (!model) {
    std::fprintf(stderr, "sailor coordinator: %s\n", model.error().to_string().c_str());
    return exit_bad_input;
  }
  in.model = std::move(*model);
  auto job = config::load_job(args.job);
  if (!job) {
    std::fprintf(stderr, "sailor coordinator: %s\n", job.error().to_string().c_str());
    return exit_bad_input;
  }
  in.job = std::move(*job);
  if (args.scheduler != "builtin" && args.scheduler != "remote") {
    std::fprintf(stderr, "sailor coordinator: --scheduler: expected builtin or remote, got '%s'\n",
                 args.scheduler.c_str());
    return exit_bad_input;
  }
  if (args.heartbeat_ms <= 0 || args.heartbeat_timeout_ms <= args.heartbeat_ms) {
    std::fprintf(stderr, "sailor coordinator: --heartbeat-timeout-ms must exceed "
                         "--heartbeat-ms > 0\n");
    return exit_bad_input;
  }
  return exit_done;
}

// Signals are taken by sigwait in serve, not by handlers: blocked before any thread starts.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // training finished or failed (--exit-when-done)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// The supervisor's options that do not depend on the planner or on training.
actors::coordinator_options base_options(const coordinator_args& args,
                                         const coordinator_inputs& in, comm::transport* transport) {
  actors::coordinator_options options;
  options.transport = transport;
  options.host = in.listen.host;
  options.port = in.listen.port;
  for (auto& z : in.cluster.zones)
    options.supervisor.zones.push_back(z.name);
  options.supervisor.quorum = args.quorum;
  options.supervisor.settle =
    std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(args.settle_s));
  options.supervisor.heartbeat_interval = std::chrono::milliseconds{args.heartbeat_ms};
  options.supervisor.heartbeat_timeout = std::chrono::milliseconds{args.heartbeat_timeout_ms};
  options.supervisor.model_layers = in.model.num_all_layers();  // a plan must cover them all
  options.remote_scheduler = args.scheduler == "remote";
  return options;
}

// Starts the coordinator and its dashboard, says where they listen, waits for a signal (or
// the end of training with --exit-when-done), stops them and writes the summary.
int serve(const coordinator_args& args, const coordinator_inputs& in, caf::actor_system& system,
          actors::coordinator_options options, coordinator_outcome& outcome,
          const sigset_t& signals) {
  auto board = std::make_shared<actors::status_board>();
  options.supervisor.board = board;
  auto jsonl = open_metrics_jsonl(args.metrics_jsonl, board, in.cluster, in.model);
  if (!jsonl) {
    std::fprintf(stderr, "sailor coordinator: %s\n", jsonl.error().message.c_str());
    return exit_bad_input;
  }
  append_figures_on_iteration(options.supervisor, *jsonl);
  const std::string options_note = options.supervisor.mode_note;
  auto coordinator = actors::coordinator::start(system, std::move(options));
  if (!coordinator) {
    std::fprintf(stderr, "sailor coordinator: %s\n", coordinator.error().message.c_str());
    return exit_unavailable;
  }
  in.drift->start(board, (*coordinator)->supervisor());
  if (in.probes)
    in.probes->attach(system, (*coordinator)->links());
  auto dashboard = start_dashboard(args.dashboard, board, in.cluster, in.model);
  if (!dashboard) {
    std::fprintf(stderr, "sailor coordinator: %s\n", dashboard.error().message.c_str());
    return exit_bad_input;
  }
  std::printf("sailor coordinator: listening on %s:%u over %s (cluster %s: %s; model %s)\n",
              in.listen.host.c_str(), static_cast<unsigned>((*coordinator)->port()),
              args.transport.c_str(), in.cluster.name.c_str(),
              count_of(static_cast<long long>(in.cluster.zones.size()), "zone").c_str(),
              in.model.name.c_str());
  if (*dashboard)
    std::printf("sailor coordinator: dashboard on %s\n", (*dashboard)->url().c_str());
  if (args.scheduler == "remote")
    std::printf("sailor coordinator: waiting for a scheduler to connect to this address (as "
                "'scheduler', with the job token); until one attaches, and after it is gone, "
                "the built-in planner (--planner %s) decides\n",
                args.planner.c_str());
  if (args.train_dir.empty())
    std::printf("sailor coordinator: %s\n", options_note.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  // SIGUSR1 is our own: training finished or failed, which is already said.
  if (sig != SIGUSR1)
    log::get("actors")->info("[coordinator] {}: shutting down", sig == SIGINT ? "interrupted" : "terminated");
  in.drift->stop();
  if (in.probes)
    in.probes->detach();
  dashboard->reset();
  coordinator->reset();
  if (!args.summary_json.empty() && !args.train_dir.empty())
    if (auto err = outcome.summary.write(args.summary_json)) {
      std::fprintf(stderr, "sailor coordinator: %s\n", err->message.c_str());
      return exit_failed;
    }
  return outcome.state == 2 ? exit_failed : exit_done;
}

// Where a token the coordinator generates is kept: the job's own folder, else a file of the
// listening port (the same on the next start) in Sailor's cache folder.
std::string generated_token_file(const coordinator_args& args, const coordinator_inputs& in) {
  if (!args.train_dir.empty())
    return (std::filesystem::path{args.train_dir} / "job-token").string();
  return (files::cache_folder() / "coordinator" / (std::to_string(in.listen.port) + ".job-token")).string();
}

int run_coordinator(const coordinator_args& args) {
  coordinator_inputs in;
  if (int code = load_inputs(args, in); code != exit_done)
    return code;
  in.drift = std::make_shared<coordinator_drift>(args.replan_on_drift && !args.train_dir.empty());
  if (args.planner == "search" && (args.emulate_links || args.probe_links))
    in.probes = std::make_shared<zone_link_probes>(in.cluster, args.emulate_links,
                                                   args.probe_timeout_s);
  const sigset_t signals = block_signals();
  auto token = job_token(args.token_file, generated_token_file(args, in), "sailor coordinator");
  if (!token)
    return report_error("coordinator", token.error());
  auto transport = actors::make_transport(args.transport, "coordinator", "", *token,
                                          in.listen.host, args.tls);
  if (!transport) {
    std::fprintf(stderr, "sailor coordinator: %s\n", transport.error().message.c_str());
    return exit_bad_input;
  }
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  auto options = base_options(args, in, transport->get());
  if (int code = choose_planner(args, in, options); code != exit_done)
    return code;
  coordinator_outcome outcome;  // outlives the coordinator (serve stops it)
  if (int code = setup_training(args, in, *token, options.supervisor, outcome); code != exit_done)
    return code;
  if (int code = start_keeper(args, in, *token, options.supervisor); code != exit_done)
    return code;
  return serve(args, in, system, std::move(options), outcome, signals);
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
                  "search (the planner's search on --profile, profiles measured here and the "
                  "catalog), even (layers split evenly, no profiles needed) or sailor (Sailor's "
                  "planner; needs --sailor-data)")
    ->capture_default_str();
  sub->add_option("--scheduler", args->scheduler,
                  "builtin (the --planner decides) or remote (a scheduler in its own process "
                  "connects to --listen like a node, authenticated by the job token; see the "
                  "docs/scheduler-api.md)")
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
                  "nodes hold). Its journal (DIR/journal) keeps the job's plans, iterations and "
                  "recoveries: a coordinator started again on DIR with the same token continues "
                  "the job");
  sub->add_option("--summary-json", args->summary_json,
                  "with --train-dir: write the run's summary here at exit (the fields of "
                  "`sailor demo --summary-json`: iterations_completed, loss_curve, replans, "
                  "recovery_s, tokens_per_s, predicted_iteration_s, measured_iteration_s)");
  sub->add_option("--metrics-jsonl", args->metrics_jsonl,
                  "with --train-dir: append one JSON line per completed iteration here (the "
                  "figures of the dashboard's /metrics)");
  sub->add_option("--iterations", args->iterations,
                  "training iterations (default: the job file's 'iterations')")
    ->check(positive_number());
  sub->add_option("--checkpoint-every", args->checkpoint_every,
                  "checkpoint every this many iterations (0: never; a re-plan then resumes "
                  "from the ranks' memory, or afresh when no rank kept its state)")
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
                "latency and bandwidth (for nodes that share one machine); with --planner "
                "search, the nodes probe each zone pair's shaped link and the search plans on "
                "what they measured");
  sub->add_flag("--probe-links", args->probe_links,
                "with --planner search: the nodes probe the real link of each zone pair "
                "(latency, bandwidth from 64 KiB to 64 MiB) and the search plans on what they "
                "measured instead of the cluster file's figures");
  sub->add_option("--probe-timeout-s", args->probe_timeout_s,
                  "bound on each wait of a link probe between nodes; a pair whose probe fails "
                  "keeps its configured link, with a warning")
    ->check(positive_number())
    ->capture_default_str();
  // Two flags, not "--a,!--no-a": CLI11 prints the negation's value ("{false}") beside it.
  sub->add_flag("--replan-on-drift", args->replan_on_drift,
                "with --planner search and --train-dir: re-plan when a node's measured compute "
                "drifts (a straggler) and another plan is predicted faster by 10% or more, "
                "re-planning's cost counted (default: on)");
  sub->add_flag_callback("--no-replan-on-drift", [args] { args->replan_on_drift = false; },
                         "never re-plan for drift (turns --replan-on-drift off)");
  sub->add_flag("--keep-checkpoints", args->keep_checkpoints,
                "with --train-dir: keep a copy of every checkpoint the nodes write under "
                "--train-dir/kept and serve it to later plans, so that a checkpoint outlives "
                "every node (spot capacity gone at once; nodes keep theirs in their own "
                "--state-dir); --listen must be an address the nodes reach");
  sub->add_flag("--exit-when-done", args->exit_when_done,
                "exit once training finished (code 0) or failed (code 1)");
  sub->add_option("--transport", args->transport,
                  "tcp or ucx (UCX ports must not face untrusted networks: docs/distributed.md)")
    ->capture_default_str();
  add_dashboard_options(sub, args->dashboard);
  add_token_option(sub, args->token_file);
  add_tls_options(sub, args->tls);
  sub->callback([&commands, args] {
    commands.selected = [args] { return run_coordinator(*args); };
  });
}

}  // namespace sailor::app
