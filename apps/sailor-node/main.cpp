// `sailor-node --join HOST:PORT --zone Z --devices cpu:N|cuda:all`: joins a coordinator with
// this machine's devices and runs the stage actors of the roles it is given.
//
// SIGTERM is a preemption notice (the coordinator re-plans without this node at once; while
// it trains, the node stays until the next plan took its ranks' state, at most --grace-s);
// SIGINT leaves the same way, and so does --leave-in S after S seconds. A coordinator that is not up yet is waited for, and one whose
// connection drops (it restarted) is joined again, for up to --join-timeout and --coordinator-grace. Exit codes:
// 0 the job finished or the node was preempted (left on a notice), 1 shut down by the
// coordinator before the job finished (let go, or the coordinator stopped) or the coordinator
// lost, 2 bad arguments, 3 no coordinator within --join-timeout or refused by it. A node the
// coordinator declared lost (stalled past the heartbeat timeout) joins again as a new member;
// one whose coordinator's connection dropped joins again for up to --coordinator-grace.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <variant>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <caf/scoped_actor.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/train/checkpoint.hpp"
#include "job_token.hpp"
#include "node_host.hpp"
#include "node_outcome.hpp"
#include "node_probes.hpp"
#include "node_sessions.hpp"
#include "profile_command.hpp"
#include "sailor/comm/auth.hpp"
#include "sailor/comm/link_table.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"
#include "sailor/protocol/limits.hpp"
#ifdef SAILOR_WITH_TRAIN
#include "sailor/actors/node_training.hpp"
#include "sailor/train/profiler.hpp"
#include "sailor/train/shard_service.hpp"
#endif

namespace {

using namespace sailor;
using namespace sailor::node;

// The one piece of process-wide state: a signal handler can reach nothing else.
int signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(signal_pipe[1], &byte, 1);
}

#ifdef SAILOR_WITH_TRAIN
static_assert(train::shard_access::default_max_held_bytes == std::int64_t{4096} << 20,
              "--max-held-state's default is the shard service's");
#endif

#ifdef SAILOR_WITH_TRAIN
// Test-only: SAILOR_TEST_HOLD_STATE_SERVE=FILE, given to several nodes: the first of them
// whose shard server is asked for in-memory state (checkpoints/<job>/mem/...) creates FILE
// (exclusively), writes its name into it, and from then on leaves every such request
// unanswered; the others serve as usual. The process test of a holder killed during a state
// transfer (tests/train_growth.test.cpp) waits for FILE and SIGKILLs the node it names, while
// a fetch from it is under way.
train::shard_server::request_hold held_state_requests(const std::string& node) {
  const char* marker = std::getenv("SAILOR_TEST_HOLD_STATE_SERVE");
  if (!marker || !*marker)
    return {};
  auto holding = std::make_shared<std::atomic<int>>(0);  // 0 undecided, 1 holds, 2 serves
  return [file = std::string{marker}, node, holding](const std::string& path) {
    if (path.find("/mem/") == std::string::npos)
      return false;
    if (holding->load() == 0) {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL, files::private_file_mode);
      if (fd >= 0) {
        std::fprintf(stderr, "sailor-node: SAILOR_TEST_HOLD_STATE_SERVE: holding the request "
                             "for %s\n", path.c_str());
        const std::string line = node + "\n";
        const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
        ::close(fd);
        holding->store(written ? 1 : 2);
      } else {
        holding->store(2);
      }
    }
    return holding->load() == 1;
  };
}
#endif

// SIGUSR2: the slowdown from the first line of `file` (a number from 1 to 1000; anything else
// is refused with a warning and changes nothing).
void reload_slowdown(const std::string& file, std::atomic<double>& slowdown) {
  std::ifstream in(file);
  double f = 0;
  if (file.empty() || !(in >> f) || !(f >= 1.0 && f <= 1000)) {
    std::fprintf(stderr, "sailor-node: SIGUSR2: --slowdown-file '%s': expected a number from 1 "
                         "to 1000 on its first line; the slowdown stays %.2f\n",
                 file.c_str(), slowdown.load());
    return;
  }
  slowdown.store(f);
  std::fprintf(stderr, "sailor-node: compute now stretched %.2f times\n", f);
}

// --link-file: the emulated links changed (comm/link_table.hpp), all or none; a bad file is
// an error naming its line, and changes nothing.
sailor::status reload_links(const std::string& file, comm::link_table& links) {
  auto changes = comm::read_link_changes(file);
  if (!changes)
    return changes.error();
  for (auto& l : *changes) {
    std::fprintf(stderr, "sailor-node: link %s <-> %s now %.1f ms, %.3g MB/s (--link-file)\n",
                 l.from.c_str(), l.to.c_str(), l.latency_s * 1000, l.bandwidth_gbytes_per_s * 1000);
    links.set(std::move(l));
  }
  return {};
}

// SIGUSR2: the emulation files read again, those given that exist (a missing one is no
// change; the demo writes them only when it changes something).
void reload_emulation(const session_context& ctx) {
  std::error_code ec;
  const auto& a = ctx.args;
  if (!a.slowdown_file.empty() && std::filesystem::exists(a.slowdown_file, ec))
    reload_slowdown(a.slowdown_file, *ctx.slowdown);
  if (!a.link_file.empty() && std::filesystem::exists(a.link_file, ec))
    if (auto err = reload_links(a.link_file, *ctx.links))
      std::fprintf(stderr, "sailor-node: SIGUSR2: %s; the links stay as they were\n",
                   err->to_string().c_str());
}

// Runs the node's sessions with SIGTERM/SIGINT turned into a stop (a preemption notice).
int run_until_stopped(session_context& ctx) {
  // SIGTERM/SIGINT go through a self-pipe to a watcher thread. A handler, not a signal mask:
  // libraries loaded before main() (OpenBLAS, LibTorch) start threads that would not block
  // the signal, and one of them would take the default action and kill the process.
  if (::pipe(signal_pipe) != 0) {
    std::perror("sailor-node: pipe");
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);  // --slowdown-file and --link-file read again

  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  stop_watch stop;
  std::thread signal_thread([&stop, &ctx] {
    for (;;) {
      unsigned char sig = 0;
      while (::read(signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
      }
      if (sig == SIGUSR2) {
        reload_emulation(ctx);
        continue;
      }
      if (sig == SIGTERM || sig == SIGINT)
        stop.signal();
      return;
    }
  });
  // --leave-in: the notice a spot instance gets, on a timer (as SIGTERM).
  std::thread leave_thread;
  if (ctx.args.leave_in_s > 0)
    leave_thread = std::thread([&stop, s = ctx.args.leave_in_s] {
      if (stop.wait(std::chrono::milliseconds{static_cast<std::int64_t>(s * 1000)}))
        stop.signal();
    });
  const int code = run_sessions(system, ctx, stop);
  if (ctx.probes)
    ctx.probes->wait();  // their answers go through `system`
  const unsigned char wake = 0;  // not a signal: only ends the watcher
  (void)!::write(signal_pipe[1], &wake, 1);
  signal_thread.join();
  stop.signal();  // ends the leave timer, if any
  if (leave_thread.joinable())
    leave_thread.join();
  return code;
}

// Prints "sailor-node: <what>" and gives the exit code of bad input.
int bad_input(const std::string& what) {
  std::fprintf(stderr, "sailor-node: %s\n", what.c_str());
  return 2;
}

// The node's inventory and grace from the command line; an exit code when it is refused.
std::variant<actors::node_agent_options, int> agent_options(const node_args& args) {
  std::string default_type;
  auto devices = parse_devices(args.devices, default_type);
  if (!devices)
    return bad_input(devices.error().field + ": " + devices.error().message);
  // CPU devices are planned by what they are: a GPU type would have the planner count on a GPU.
  if (default_type == "CPU" && !args.gpu_type.empty() && args.gpu_type != "CPU" && !args.emulate_gpu)
    return bad_input("--gpu-type: '" + args.gpu_type + "' names a GPU, but --devices " + args.devices +
                     " are CPU cores (give --devices cuda:N on a GPU machine, leave --gpu-type out, or "
                     "say --emulate-gpu)");
  actors::node_agent_options options;
  options.leave_grace = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(args.grace_s));
  options.inventory.host = host_name();
  options.inventory.name = args.name.empty() ? options.inventory.host + "-" + std::to_string(::getpid()) : args.name;
  options.inventory.zone = args.zone;
  options.inventory.gpu_type = args.gpu_type.empty() ? default_type : args.gpu_type;
  options.inventory.devices = std::move(*devices);
  return options;
}

// The link probes the coordinator asks for (issue 14), over this node's data-transport kind.
void serve_link_probes(session_context& ctx, const std::string& token) {
  comm::transport_options probe_options;
  probe_options.local_name = ctx.options.inventory.name;
  probe_options.local_zone = ctx.options.inventory.zone;
  probe_options.token = token;
  probe_options.tls = ctx.args.tls;
  auto probes = std::make_shared<node_probes>(data_transport_maker(ctx.args, ctx.advertise), probe_options,
                                              ctx.advertise, ctx.links);
  ctx.probes = probes;
  ctx.options.on_link_probe = [probes](const protocol::link_probe_request& r,
                                       std::function<void(protocol::link_probe_result)> answer) {
    probes->handle(r, std::move(answer));
  };
}

// Checks the inputs, opens the transport and the shard server, then joins and serves until
// stopped.
int run(const node_args& args) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (args.threads_given && (args.threads < 1 || args.threads > cores))
    return bad_input("--threads: expected 1 to " + std::to_string(cores) + " (this host's cores), got " +
                     std::to_string(args.threads));
  auto where = comm::address::parse(args.join);
  if (!where)
    return bad_input("--join: " + where.error().message);
  auto agent = agent_options(args);
  if (auto* code = std::get_if<int>(&agent))
    return *code;
  auto& options = std::get<actors::node_agent_options>(agent);
  auto state_dir = make_state_dir(args.state_dir, options.inventory.name, !args.name.empty());
  if (!state_dir)
    return bad_input("--state-dir: " + state_dir.error().message);
  log_to_folder(args.log_dir_given, args.log_dir, options.inventory.name, *state_dir);
  auto advertise = advertised_address(args.advertise, where->host, where->port);
  if (!advertise)
    return bad_input(advertise.error().message);
  auto token = comm::load_job_token(args.token_file);
  if (!token)
    return bad_input(token.error().to_string());
  auto data_kind = args.data_transport.empty() ? args.transport : args.data_transport;
  if (args.tls.enabled() && data_kind == "ucx")
    return bad_input("TLS (--tls-cert/--tls-key/--tls-ca) needs --transport tcp and --data-transport tcp: "
                     "UCX does not encrypt");
  auto transport = actors::make_transport(args.transport, options.inventory.name, options.inventory.zone, *token,
                                          *advertise, args.tls);
  if (!transport)
    return bad_input(transport.error().message);
  // Checkpoint shards travel over the bridge's transport.
  comm::transport* data = transport->get();
  options.inventory.address = *advertise + ":0";
#ifdef SAILOR_WITH_TRAIN
  auto memory = std::make_shared<train::memory_shards>();
  auto access = std::make_shared<train::shard_access>(args.max_held_state_mib << 20);
  access->set_self(options.inventory.name);
  access->set_services({actors::keeper_name});
  auto shards = train::shard_server::start(*data, *advertise, *state_dir, memory,
                                           held_state_requests(options.inventory.name), access);
  if (!shards)
    return bad_input("serving checkpoint shards on " + *advertise + ": " + shards.error().message);
  options.inventory.address = (*shards)->address();
  options.inventory.checkpoints = held_shards(*state_dir);
#endif
  log::get("actors")->info("[node {}] peers reach it on {}; state in {} ({} checkpoint shards)",
                           options.inventory.name, *advertise, *state_dir, options.inventory.checkpoints.size());
  session_context ctx{args, *where, options, *state_dir, *advertise, data, transport->get()
#ifdef SAILOR_WITH_TRAIN
                      , memory, access
#endif
  };
  serve_link_probes(ctx, *token);
  ctx.slowdown->store(args.slowdown);
  std::error_code missing;
  if (!args.link_file.empty() && std::filesystem::exists(args.link_file, missing))
    if (auto err = reload_links(args.link_file, *ctx.links))
      return bad_input("error: --link-file: " + err->to_string());
  return run_until_stopped(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  sailor::files::restrict_new_files();  // checkpoints, logs and state: 0600 in 0700 folders
  sailor::log::setup();
  // `sailor-node profile ...` is what `sailor profile` runs (this binary holds LibTorch).
  if (argc > 1 && std::string(argv[1]) == "profile") {
#ifdef SAILOR_WITH_TRAIN
    return node::profile_command(std::vector<std::string>(argv + 2, argv + argc));
#else
    std::fprintf(stderr, "sailor profile: not built yet (this build has no LibTorch)\n");
    return 3;
#endif
  }
  CLI::App app{"sailor-node: join a Sailor coordinator with this machine's devices", "sailor-node"};
  node_args args;
  app.add_option("--join", args.join, "HOST:PORT of the coordinator")->required();
  app.add_option("--zone", args.zone, "the zone this node is in")->required();
  app.add_option("--devices", args.devices, "cpu:N, cuda:N or cuda:all")->capture_default_str();
  app.add_option("--gpu-type", args.gpu_type, "GPU type as the cluster names it (default: CPU "
                                              "for cpu devices)");
  app.add_option("--name", args.name, "node name (default: HOST-PID)");
  app.add_option("--transport", args.transport, "tcp or ucx (as the coordinator)")
    ->capture_default_str();
  app.add_option("--data-transport", args.data_transport,
                 "tcp or ucx: what activations and gradients travel over (default: as "
                 "--transport)")
    ->check(CLI::IsMember({"tcp", "ucx"}));
  app.add_option("--advertise", args.advertise,
                 "the address peers reach this node on; its collectives listen there "
                 "(default: the address of the interface that reaches the coordinator)");
  app.add_option("--state-dir", args.state_dir,
                 "this node's own folder for checkpoint shards (default: ~/.cache/sailor/NAME "
                 "with --name, else ~/.cache/sailor/node-HOST-K, the first such folder no running "
                 "node holds: the same one run after run); nothing is shared with other nodes");
  app.add_option("--token-file", args.token_file,
                 "file whose first line is the job token (default: the SAILOR_TOKEN environment "
                 "variable)");
  sailor::app::add_tls_options(&app, args.tls);
  app.add_flag("--emulate-gpu", args.emulate_gpu,
               "plan these CPU cores as the --gpu-type named (to try heterogeneous plans on a "
               "machine without GPUs; the times are the CPU's)");
  app.add_option("--join-timeout", args.join_timeout_s,
                 "seconds to keep trying to join when the coordinator is not up yet (and to "
                 "join again after it declared this node lost)")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--coordinator-grace", args.coordinator_grace_s,
                 "seconds to keep trying to join again after the coordinator's connection "
                 "dropped (it was killed or restarted; a coordinator restarted on the same "
                 "--train-dir continues the job); then the node exits 1, its state folder kept")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--slowdown", args.slowdown,
                 "emulation: stretch every iteration's compute this many times (1 to 1000)")
    ->check(CLI::Range(1.0, 1000.0))
    ->capture_default_str();
  app.add_option("--slowdown-file", args.slowdown_file,
                 "emulation: on SIGUSR2 the slowdown is read again from this file's first line");
  app.add_option("--link-file", args.link_file,
                 "emulation (with the coordinator's --emulate-links): emulated zone links "
                 "changed at run time, one 'ZONE_A:ZONE_B=LATENCY_MS,MBPS' a line, read at the "
                 "start and again on SIGUSR2; the shaper applies them to the bytes sent from "
                 "then on");
  app.add_option("--leave-in", args.leave_in_s,
                 "seconds after the start at which the node gets a preemption notice (as "
                 "SIGTERM: it tells the coordinator, hands over its state, then leaves)")
    ->check(CLI::PositiveNumber);
  app.add_option("--grace-s", args.grace_s,
                 "after a preemption notice (SIGTERM, --leave-in): the longest the node stays "
                 "to hand its state to the next plan")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--threads", args.threads,
                 "compute threads of each rank, 1 to this host's cores: OpenBLAS threads for its "
                 "matrix products (LibTorch's other operators run on the rank's own thread) "
                 "(default: the host's cores shared among the plan's ranks on this host, the "
                 "nodes whose address has this node's host, at least 1 each)");
  app.add_option("--max-held-state", args.max_held_state_mib,
                 "MiB of memory the node holds at most for the state its peers hand over "
                 "(their in-memory state when they leave with notice, copies of their "
                 "checkpoint shards), shared evenly among the other nodes of the current and "
                 "previous plans; a hand-over past it is refused (the state then comes from "
                 "disk)")
    ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
    ->capture_default_str();
  app.add_option("--log-dir", args.log_dir, "also write the log to DIR/NAME.log (\"\": stderr "
                                            "only; default: node.log in the state folder, the "
                                            "run before's kept as node.previous.log)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  args.threads_given = app.count("--threads") > 0;
  args.log_dir_given = app.count("--log-dir") > 0;
  return run(args);
}
