// The processes of `sailor train` / `sailor demo` (see local_cluster.hpp).
#include "local_cluster.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <caf/scoped_actor.hpp>

#include "sailor/comm/auth.hpp"

namespace sailor::app {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

std::string local_zone_name(int z) { return std::string("local-") + static_cast<char>('a' + z); }

namespace {

// Bytes of physical memory of this machine (0: unknown).
std::uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

}  // namespace

config::cluster local_zones_cluster(const config::cluster& base, int nodes, int zones, int regions,
                                    const config::zone_link* cross_region) {
  config::cluster c = base;
  // The local nodes' CPU devices hold what this machine holds, shared among them (three
  // quarters of it: the coordinator, the page cache): the cluster file's figure is nominal,
  // and a model that fits the host (GPT-2 small's 3 GB to fine-tune) is not refused for it.
  if (const auto* cpu = c.gpus.find("CPU"); cpu && nodes > 0) {
    const std::uint64_t share = host_memory_bytes() / 4 * 3 / static_cast<std::uint64_t>(nodes);
    if (share > cpu->memory_bytes) {
      auto spec = *cpu;
      spec.memory_bytes = share;
      spec.source += "; memory: this machine's, shared by " + std::to_string(nodes) + " nodes";
      c.gpus.upsert(spec);
    }
  }
  c.name = "local-" + std::to_string(zones) + "-zones";
  c.zones.clear();
  c.links.clear();
  c.regions.clear();
  regions = std::clamp(regions, 1, std::max(1, zones));
  auto region_of = [&](int z) {
    return regions == 1 ? std::string{"local"} : "local-" + std::to_string(z * regions / zones + 1);
  };
  for (int z = 0; z < zones; ++z) {
    config::zone zone;
    zone.name = local_zone_name(z);
    zone.region = region_of(z);
    int count = 0;
    for (int k = 0; k < nodes; ++k)
      if (k % zones == z)
        ++count;
    zone.gpus["CPU"] = count;
    c.zones.push_back(zone);
    if (c.regions.empty() || c.regions.back().name != zone.region) c.regions.push_back({zone.region, {}});
    c.regions.back().zones.push_back(zone.name);
  }
  config::zone_link tmpl;
  tmpl.latency_s = 0.002;
  tmpl.bandwidth_gbytes_per_s = 0.1;
  if (!base.links.empty())
    tmpl = base.links.front();
  for (int a = 0; a < zones; ++a)
    for (int b = a + 1; b < zones; ++b) {
      auto l = cross_region && region_of(a) != region_of(b) ? *cross_region : tmpl;
      l.from = local_zone_name(a);
      l.to = local_zone_name(b);
      c.links.push_back(l);
    }
  return c;
}

local_cluster::local_cluster(std::string command) : command_(std::move(command)) {
  config_ = std::make_unique<actors::runtime_config>();
  system_ = std::make_unique<caf::actor_system>(*config_);
}

local_cluster::~local_cluster() { cleanup(1, true); }

status local_cluster::make_work_dir() {
  const std::string prefix = (fs::temp_directory_path() / ("sailor-" + command_ + "-XXXXXX")).string();
  std::vector<char> tmpl(prefix.begin(), prefix.end());
  tmpl.push_back('\0');
  if (!mkdtemp(tmpl.data()))
    return sailor::error::failed("cannot create a temporary folder " + prefix);
  work_ = tmpl.data();
  return {};
}

status local_cluster::use_work_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return sailor::error::failed("cannot create " + dir.string() + ": " + ec.message());
  work_ = fs::absolute(dir).lexically_normal();
  work_kept_ = true;
  return {};
}

void local_cluster::remove_work_dir() {
  std::error_code ec;
  if (!work_.empty() && !work_kept_)
    fs::remove_all(work_, ec);
  work_.clear();
}

namespace {
// The one piece of process-wide state: a signal handler reaches nothing else. A handler, not
// a signal mask: the threads started before take_signals() (the actor system's, OpenBLAS's,
// LibTorch's) do not block the signals, and the one that took Ctrl-C ended the process with
// the default action (code 130, not a word said).
int signal_pipe[2] = {-1, -1};

extern "C" void on_local_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(signal_pipe[1], &byte, 1);
}
}  // namespace

void local_cluster::take_signals() {
  if (signal_pipe[0] < 0 && ::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("sailor: pipe");  // Ctrl-C then ends the process as without take_signals()
    return;
  }
  struct sigaction action {};
  action.sa_handler = on_local_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signals_taken_ = true;
}

bool local_cluster::interrupted() {
  unsigned char sig = 0;
  return signals_taken_ && ::read(signal_pipe[0], &sig, 1) == 1;
}

void local_cluster::hold(double seconds) {
  const auto until = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                           std::chrono::duration<double>(seconds));
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock_type::now()).count();
    if (left <= 0)
      return;
    if (!signals_taken_) {
      std::this_thread::sleep_for(std::chrono::milliseconds{left});  // sleep override: nothing to wake it
      continue;
    }
    pollfd ready{signal_pipe[0], POLLIN, 0};
    const int n = ::poll(&ready, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (n > 0 && interrupted())
      return;  // SIGINT/SIGTERM ends the hold
  }
}

status local_cluster::start(actors::coordinator_options options, const dashboard_args& dashboard,
                            const config::cluster& cluster, const config::model_shape& model) {
  options.host = "127.0.0.1";
  options.port = 0;
  const auto token = comm::generate_job_token();
  token_file_ = work_ / "job.token";
  if (!(std::ofstream(token_file_) << token << "\n"))
    return sailor::error::failed("cannot write " + token_file_.string());
  auto made = actors::make_transport("tcp", "coordinator", "", token, options.host);
  if (!made)
    return sailor::error::failed("coordinator: " + made.error().message);
  transport_ = std::move(*made);
  options.transport = transport_.get();
  if (share_nothing_) {
    train::checkpoint_keeper_options k;
    k.state_dir = (work_ / "kept").string();
    k.host = options.host;
    auto keeper = actors::start_checkpoint_keeper("tcp", token, k);
    if (!keeper)
      return sailor::error::failed("checkpoint keeper: " + keeper.error().message);
    options.supervisor.keeper = *keeper;
  }
  auto board = options.supervisor.board;
  auto started = actors::coordinator::start(*system_, std::move(options));
  if (!started)
    return sailor::error::failed("coordinator: " + started.error().message);
  coordinator_ = std::move(*started);
  if (!board)
    return {};
  auto served = start_dashboard(dashboard, board, cluster, model);
  if (!served)
    return served.error();
  web_ = std::move(*served);
  return {};
}

std::uint16_t local_cluster::port() const { return coordinator_ ? coordinator_->port() : 0; }

const actors::supervisor_actor& local_cluster::supervisor() const { return coordinator_->supervisor(); }

std::optional<actors::cluster_status> local_cluster::query() {
  std::optional<actors::cluster_status> out;
  if (!coordinator_)
    return out;
  caf::scoped_actor self{*system_};
  self->request(coordinator_->supervisor(), std::chrono::seconds{2}, actors::status_request{})
    .receive([&](actors::cluster_status& s) { out = std::move(s); }, [](caf::error&) {});
  return out;
}

int local_threads_per_node(int nodes) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, nodes));
}

status local_cluster::spawn_nodes(const std::string& node_binary, int nodes, int zones) {
  threads_per_node_ = local_threads_per_node(nodes);
  for (int k = 0; k < nodes; ++k)
    if (auto err = spawn_node(node_binary, "node-" + std::to_string(k), local_zone_name(k % zones)))
      return err;
  return {};
}

status local_cluster::spawn_node(const std::string& node_binary, const std::string& name,
                                 const std::string& zone) {
  child c;
  c.name = name;
  c.log = (work_ / (c.name + ".log")).string();
  // One state folder for the nodes of this machine: the last plan's checkpoint is then
  // whole in one place, for the sample at the end (unless they share nothing).
  const auto state = share_nothing_ ? work_ / name : work_;
  std::vector<std::string> argv{
    node_binary, "--join", "127.0.0.1:" + std::to_string(port()), "--zone", zone,
    "--devices", "cpu:1", "--name", c.name, "--transport", "tcp", "--token-file",
    token_file_.string(), "--state-dir", state.string(), "--log-dir",
    "",  // its log is c.log already
    "--slowdown-file", (work_ / (c.name + ".slowdown")).string(), "--link-file",
    (work_ / (c.name + ".links")).string()};
  if (threads_per_node_ > 0) {
    argv.push_back("--threads");
    argv.push_back(std::to_string(threads_per_node_));
  }
  c.pid = spawn(argv, c.log);
  if (c.pid < 0)
    return sailor::error::failed("cannot start " + node_binary);
  children_.push_back(c);
  return {};
}

int local_cluster::live_children() const {
  int n = 0;
  for (const auto& c : children_)
    n += c.exit_code == -1 ? 1 : 0;
  return n;
}

std::string local_cluster::child_died() {
  if (auto* c = reap(children_))
    return c->name + " exited with code " + std::to_string(c->exit_code) + "; its log:\n" +
           tail_of(c->log);
  return {};
}

status local_cluster::wait_for_joins(int nodes, double timeout_s) {
  const auto deadline =
    clock_type::now() + std::chrono::milliseconds{static_cast<long>(timeout_s * 1000)};
  while (true) {
    if (interrupted())
      return sailor::error::failed("interrupted");
    if (auto why = child_died(); !why.empty())
      return sailor::error::failed("before joining: " + why);
    auto st = query();
    const int joined = st ? static_cast<int>(st->nodes.size()) : 0;
    if (joined >= nodes)
      return {};
    if (clock_type::now() > deadline)
      return sailor::error::failed(std::to_string(joined) + " of " + std::to_string(nodes) +
                                   " nodes joined within " + std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds{50});  // polling the join count
  }
}

void local_cluster::stop_processes() {
  coordinator_.reset();
  stop_children(children_, std::chrono::seconds{3});
}

int local_cluster::cleanup(int code, bool keep_logs) {
  if (cleaned_)
    return code;
  cleaned_ = true;
  web_.reset();
  stop_processes();
  if (work_.empty() || work_kept_)
    return code;  // a run's folder: the command says where it is and what it holds
  if (code == 0 && !keep_logs) {
    std::error_code ec;
    fs::remove_all(work_, ec);
  } else {
    std::fprintf(stderr, "sailor %s: the job's state (coordinator, node checkpoints) and node logs kept "
                         "in %s\n", command_.c_str(), work_.c_str());
  }
  return code;
}

}  // namespace sailor::app
