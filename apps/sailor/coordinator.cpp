// `sailor coordinator`: runs the job supervisor that sailor-node processes join.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>

#include "commands.hpp"
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
  std::string transport = "ucx";
  std::string planner = "even";
  std::string sailor_data;
};

int run_coordinator(const coordinator_args& args) {
  auto where = actors::parse_host_port(args.listen);
  if (!where) {
    std::fprintf(stderr, "sailor coordinator: --listen: %s\n", where.error().message.c_str());
    return 2;
  }
  auto cluster = config::load_cluster(args.cluster);
  if (!cluster) {
    std::fprintf(stderr, "sailor coordinator: %s\n", cluster.error().to_string().c_str());
    return 2;
  }
  auto model = config::load_model(args.model);
  if (!model) {
    std::fprintf(stderr, "sailor coordinator: %s\n", model.error().to_string().c_str());
    return 2;
  }
  auto job = config::load_job(args.job);
  if (!job) {
    std::fprintf(stderr, "sailor coordinator: %s\n", job.error().to_string().c_str());
    return 2;
  }
  if (args.heartbeat_ms <= 0 || args.heartbeat_timeout_ms <= args.heartbeat_ms) {
    std::fprintf(stderr, "sailor coordinator: --heartbeat-timeout-ms must exceed "
                         "--heartbeat-ms > 0\n");
    return 2;
  }
  // Signals are taken by sigwait below, not by handlers: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto transport = actors::make_transport(args.transport, "coordinator", "");
  if (!transport) {
    std::fprintf(stderr, "sailor coordinator: %s\n", transport.error().message.c_str());
    return 2;
  }
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  actors::coordinator_options options;
  options.transport = transport->get();
  options.host = where->first;
  options.port = where->second;
  for (auto& z : cluster->zones)
    options.supervisor.zones.push_back(z.name);
  options.supervisor.quorum = args.quorum;
  options.supervisor.settle =
    std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(args.settle_s));
  options.supervisor.heartbeat_interval = std::chrono::milliseconds{args.heartbeat_ms};
  options.supervisor.heartbeat_timeout = std::chrono::milliseconds{args.heartbeat_timeout_ms};
  if (args.planner == "sailor") {
    // Sailor's planner needs per-layer profiles of the GPU types that join.
    if (args.sailor_data.empty()) {
      std::fprintf(stderr, "sailor coordinator: --planner sailor needs --sailor-data DIR\n");
      return 2;
    }
    auto name = model->sailor_name.empty() ? model->name : model->sailor_name;
    auto data = config::load_sailor_data(args.sailor_data, name);
    if (!data) {
      std::fprintf(stderr, "sailor coordinator: %s\n", data.error().to_string().c_str());
      return 2;
    }
    planner::problem prob;
    prob.model = *model;
    prob.profile = data->profile;
    prob.network = data->network;
    prob.cluster = *cluster;
    prob.job = *job;
    options.plan = actors::sailor_planning(std::move(prob));
  } else if (args.planner == "even") {
    // Needs no profiles (CPU nodes have none): layers split evenly, one pipeline per device
    // group of a zone.
    int layers = model->num_all_layers();
    int batch = job->global_batch;
    options.plan = [layers, batch](const actors::plan_request& request) {
      return actors::even_plan(request.nodes, layers, batch);
    };
  } else {
    std::fprintf(stderr, "sailor coordinator: --planner: expected even or sailor, got '%s'\n",
                 args.planner.c_str());
    return 2;
  }
  auto coordinator = actors::coordinator::start(system, std::move(options));
  if (!coordinator) {
    std::fprintf(stderr, "sailor coordinator: %s\n", coordinator.error().message.c_str());
    return 1;
  }
  std::printf("sailor coordinator: listening on %s:%u over %s (cluster %s: %zu zones; model %s)\n",
              where->first.c_str(), static_cast<unsigned>((*coordinator)->port()),
              args.transport.c_str(), cluster->name.c_str(), cluster->zones.size(),
              model->name.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  log::get("actors")->info("[coordinator] signal {}: shutting down", sig);
  coordinator->reset();
  return 0;
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
    ->capture_default_str();
  sub->add_option("--settle-s", args->settle_s, "plan this long after the first node joined")
    ->capture_default_str();
  sub->add_option("--heartbeat-ms", args->heartbeat_ms, "heartbeat interval of the nodes")
    ->capture_default_str();
  sub->add_option("--heartbeat-timeout-ms", args->heartbeat_timeout_ms,
                  "a node silent this long is lost")
    ->capture_default_str();
  sub->add_option("--planner", args->planner,
                  "even (no profiles needed) or sailor (Sailor's planner; needs --sailor-data)")
    ->capture_default_str();
  sub->add_option("--sailor-data", args->sailor_data,
                  "a Sailor data folder with profiles of the model (for --planner sailor)");
  sub->add_option("--transport", args->transport,
                  "ucx or tcp (the comm transports) or socket (the bridge's own TCP)")
    ->capture_default_str();
  sub->callback([&commands, args] {
    commands.selected = [args] { return run_coordinator(*args); };
  });
}

}  // namespace sailor::app
