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

struct node_args;
comm::transport_maker data_transport_maker(const node_args& args, const std::string& advertise);

struct node_args {
  std::string join;
  std::string zone;
  std::string devices = "cpu:1";
  std::string gpu_type;
  std::string name;
  std::string transport = "tcp";
  std::string data_transport;  ///< empty: as --transport
  std::string token_file;
  comm::transport_options::tls_files tls;
  std::string advertise;  ///< empty: the address of the interface that reaches the coordinator
  std::string state_dir;  ///< empty: node_host.hpp's default (stable across runs)
  std::string log_dir;    ///< with log_dir_given: DIR/NAME.log, or "" for stderr only
  bool log_dir_given = false;  ///< else: STATE_DIR/node.log (the run before's as node.previous.log)
  bool emulate_gpu = false;  ///< CPU cores planned as --gpu-type (tests, demos)
  double join_timeout_s = 60;  ///< retry the join this long at the start (and when declared lost)
  double coordinator_grace_s = 120;  ///< after the coordinator's connection dropped
  double slowdown = 1;         ///< emulation: compute stretched this many times
  std::string slowdown_file;   ///< SIGUSR2 reads the slowdown from its first line
  std::string link_file;       ///< SIGUSR2 reads the emulated links changed from it
  double leave_in_s = 0;  ///< > 0: a preemption notice to itself this long after the start
  double grace_s = 10;    ///< after a notice: the longest it stays to hand over its state
  int threads = 0;        ///< compute threads per rank; 0: the cores over the node's ranks
  /// MiB of state peers hand over that the node holds at most (shard_access.hpp).
  std::int64_t max_held_state_mib = 4096;
  bool threads_given = false;  ///< --threads was on the command line (0 is then refused)
};

// Each rank's data-plane transport: UCX or comm's TCP (--data-transport, else --transport).
// UCX is limited to the interface of the advertised address unless UCX_NET_DEVICES says.
comm::transport_maker data_transport_maker(const node_args& args, const std::string& advertise) {
  std::string kind = args.data_transport;
  if (kind.empty()) kind = args.transport == "ucx" ? "ucx" : "tcp";
  return [kind, advertise](const comm::transport_options& o) -> result<std::unique_ptr<comm::transport>> {
    if (kind == "ucx") {
      comm::ucx_options u;
      u.common = o;
      u.host = advertise;
      return comm::make_ucx_transport(u);
    }
    return comm::make_tcp_transport(o);
  };
}

// A stop asked for by a signal: the agent of the session in progress is told (a preemption
// notice to the coordinator), and a join still being retried gives up.
class stop_watch {
public:
  void signal() {
    std::lock_guard lock{mu_};
    stopped_ = true;
    if (agent_)
      caf::anon_send(agent_, actors::preempt_atom::value);
    woken_.notify_all();
  }
  bool stopped() const {
    std::lock_guard lock{mu_};
    return stopped_;
  }
  void set_agent(actors::node_agent_actor agent) {
    std::lock_guard lock{mu_};
    agent_ = std::move(agent);
    if (stopped_ && agent_)
      caf::anon_send(agent_, actors::preempt_atom::value);
  }
  /// Waits up to `d`; false when stopped meanwhile.
  bool wait(std::chrono::milliseconds d) {
    std::unique_lock lock{mu_};
    return !woken_.wait_for(lock, d, [this] { return stopped_; });
  }

private:
  mutable std::mutex mu_;
  std::condition_variable woken_;
  bool stopped_ = false;
  actors::node_agent_actor agent_;
};

// What every session with a coordinator shares: the node's inventory and state, and the
// transport its shard server and bridge run on.
struct session_context {
  const node_args& args;
  comm::address coordinator;
  actors::node_agent_options options;
  std::string state_dir;
  std::string advertise;                 // where peers reach this node
  comm::transport* data = nullptr;       // checkpoint shards (and probes of peers)
  comm::transport* transport = nullptr;  // the bridge's
#ifdef SAILOR_WITH_TRAIN
  std::shared_ptr<train::memory_shards> memory;  // ranks' state when a plan ends (recovery)
  std::shared_ptr<train::shard_access> access;   // who may fetch from and hand over to it
#endif
  std::shared_ptr<std::atomic<double>> slowdown = std::make_shared<std::atomic<double>>(1.0);
  std::shared_ptr<comm::link_table> links = std::make_shared<comm::link_table>();  // --link-file
  std::shared_ptr<node_probes> probes = {};  // link probes the coordinator asks for
};

// Joins the coordinator, retrying with backoff while it is not up, until `deadline`.
// `window` names the option that bounds the wait, and its seconds.
result<std::unique_ptr<actors::node>> join_with_retry(
  caf::actor_system& system, const session_context& ctx, actors::node_agent_options options,
  std::pair<const char*, double> window, stop_watch& stop) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds{static_cast<std::int64_t>(window.second * 1000)};
  auto backoff = std::chrono::milliseconds{200};
  bool told = false;
  for (;;) {
    auto node = actors::node::start(system, ctx.coordinator.host, ctx.coordinator.port, options,
                                    ctx.transport);
    if (node || stop.stopped())
      return node;
    // Refused at the handshake (another job token, protocol version or TLS authority): every
    // later try would be refused the same way.
    if (node.error().kind == error_kind::invalid_input)
      return node;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return sailor::error{error_kind::disconnected,
                           "no coordinator at " + ctx.args.join + " within " + window.first +
                             " " + fmt::format("{:g}", window.second) +
                             " s: " + node.error().message,
                           "", 0, "--join"};
    if (!told)
      log::get("actors")->info("[node {}] no coordinator at {} yet ({}); retrying for up to {} s",
                               options.inventory.name, ctx.args.join, node.error().message,
                               left.count() / 1000);
    told = true;
    if (!stop.wait(std::min(backoff, left)))
      return node;
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
}

#ifdef SAILOR_WITH_TRAIN
// What a join offers: the checkpoint shards on disk and, after a session ended (its ranks
// stopped), the state they keep in memory, so that a coordinator restarted meanwhile resumes
// from it (within the protocol's bound on shards).
std::vector<std::string> offered_state(const session_context& ctx) {
  auto out = held_shards(ctx.state_dir);
  if (ctx.memory)
    for (auto& path : ctx.memory->own_paths())
      if (out.size() < protocol::wire_bounds::shards_per_node &&
          path.size() <= protocol::wire_bounds::shard_path_bytes)
        out.push_back(std::move(path));
  return out;
}
#endif

// Sessions with the coordinator until the node is told to stop, is refused, or cannot reach
// the coordinator within --join-timeout: a dropped connection (the coordinator restarted)
// is followed by a new join, with the checkpoint shards the node holds by then.
int run_sessions(caf::actor_system& system, session_context& ctx, stop_watch& stop) {
  bool lost_coordinator = false;  // its connection dropped: it is waited for --coordinator-grace
  for (;;) {
    auto options = ctx.options;
    // An outcome of this session's own: the copy would share the last session's.
    options.outcome = std::make_shared<actors::agent_outcome>();
#ifdef SAILOR_WITH_TRAIN
    options.inventory.checkpoints = offered_state(ctx);
    // Real training: each stage role becomes a rank of the executor on its own thread.
    train::node_training_options training;
    training.node_name = options.inventory.name;
    training.advertise = ctx.advertise;
    training.state_dir = ctx.state_dir;
    training.transport = ctx.data;
    training.make_data_transport = data_transport_maker(ctx.args, ctx.advertise);
    training.slowdown = ctx.slowdown;
    training.link_changes = ctx.links;
    training.memory = ctx.memory;
    training.access = ctx.access;
    training.threads_per_rank = ctx.args.threads;
    auto trainer = std::make_shared<train::node_trainer>(std::move(training));
    options.hook = [trainer](const actors::stage_role& role, actors::stage_ready_fn ready) {
      return trainer->on_role(role, std::move(ready));
    };
    options.on_training_job = [trainer](const actors::training_job& job) { trainer->on_job(job); };
    options.on_checkpoint_kept = [trainer](const actors::checkpoint_kept& kept) {
      trainer->on_checkpoint_kept(kept);
    };
    options.on_leaving = [trainer] { trainer->leaving(); };
#endif
    const auto window = lost_coordinator ? std::pair{"--coordinator-grace", ctx.args.coordinator_grace_s}
                                         : std::pair{"--join-timeout", ctx.args.join_timeout_s};
    auto node = join_with_retry(system, ctx, options, window, stop);
    if (!node) {
      const bool refused = node.error().kind == error_kind::invalid_input;
      if (lost_coordinator && !refused && !stop.stopped()) {
        std::fprintf(stderr, "sailor-node: the coordinator did not come back: %s; this node's "
                             "state folder %s is kept (%zu checkpoint shards)\n",
                     node.error().message.c_str(), ctx.state_dir.c_str(),
                     options.inventory.checkpoints.size());
        return 1;  // the coordinator lost
      }
      std::fprintf(stderr, "sailor-node: %s%s\n", refused ? "refused by the coordinator: " : "",
                   node.error().message.c_str());
      return stop.stopped() && !refused ? 0 : 3;  // unavailable: no coordinator, or refused
    }
    const actors::node_agent_actor agent = (*node)->agent();
#ifdef SAILOR_WITH_TRAIN
    trainer->set_agent(caf::actor_cast<caf::actor>(agent), (*node)->rendezvous());
#endif
    stop.set_agent(agent);
    {
      caf::scoped_actor self{system};
      self->monitor(agent);
      self->receive([](const caf::down_msg&) {});
    }
    stop.set_agent({});
    auto outcome = (*node)->outcome();
    node->reset();
    using kind = actors::agent_outcome::kind;
    // A node declared lost (it was stalled, or cut off) is alive: it joins as a new member.
    bool again = (outcome.how == kind::coordinator_lost || outcome.how == kind::declared_lost) &&
                 !stop.stopped();
#ifdef SAILOR_WITH_TRAIN
    // The coordinator went away as the job ended (its notice did not reach this node): the
    // job's last iteration is done here, there is nothing to wait for.
    if (again && outcome.how == kind::coordinator_lost && trainer->finished_job()) {
      log::get("actors")->info("[node {}] lost the coordinator after its ranks completed the job's "
                               "last iteration: the job finished", options.inventory.name);
      trainer->stop();
      return 0;
    }
#endif
#ifdef SAILOR_WITH_TRAIN
    // Its ranks stop (at their next iteration, or when a peer wait times out) before the next
    // join: what their writers still write and prune would change the shards it offers.
    trainer->stop();
#endif
    if (again) {
      lost_coordinator = outcome.how == kind::coordinator_lost;
      log::get("actors")->warn("[node {}] {} ({}); joining again for up to {} s", options.inventory.name,
                               lost_coordinator ? "lost the coordinator" : "declared lost by the coordinator",
                               outcome.reason,
                               lost_coordinator ? ctx.args.coordinator_grace_s : ctx.args.join_timeout_s);
      continue;
    }
    return exit_code_of(outcome);
  }
}

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
