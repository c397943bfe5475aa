// Soak: a coordinator trains the tiny model over N sailor-node processes while one node, at
// random, is killed (SIGKILL) and started again every 20-40 s, for M minutes; with
// --coordinator-every K, every K-th kill is the coordinator's (started again at once on the same
// train folder: it continues the job from its journal, issue 39). Prints, every
// 10 s and at the end: iterations done, plans made (re-plans), stalls (no new iteration for
// longer than --stall-s), the coordinator's RSS and descriptors, and the disk the job's
// folders use (the nodes' state folders and the coordinator's train folder).
//
//   build/bench/soak [--minutes 10] [--nodes 3] [--min-gap-s 20] [--max-gap-s 40]
//                    [--stall-s 20] [--dir DIR] [--seed 1] [--coordinator-every K]
//
// Targets (issue 20): no stall, RSS and descriptors flat, disk bounded by the checkpoints kept.
// Issue 39: from a coordinator's restart to the next iteration, no stall over 10 s; no
// completed iteration run again.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "../tests/support/child_process.hpp"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

struct soak_args {
  double minutes = 10;
  int nodes = 3;
  double min_gap_s = 20, max_gap_s = 40;
  double stall_s = 20;
  std::string dir;
  unsigned seed = 1;
  int coordinator_every = 0;  ///< every K-th kill is the coordinator's (0: never)
};

// A child process with its output in files.
struct process {
  pid_t pid = -1;
  // A node started again appends to its files.
  void start(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
    pid = sailor::testing::spawn_with_output(argv, out, err, /*append=*/true);
  }
  void stop(int sig, std::chrono::seconds limit) {
    if (pid <= 0)
      return;
    ::kill(pid, sig);
    auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

long proc_status_kib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0)
      return std::stol(line.substr(key.size()));
  return -1;
}

long open_fds(pid_t pid) {
  std::error_code ec;
  long n = 0;
  for (fs::directory_iterator i{"/proc/" + std::to_string(pid) + "/fd", ec}, end; !ec && i != end;
       i.increment(ec))
    ++n;
  return n;
}

struct disk_use {
  std::uintmax_t bytes = 0;
  long files = 0;
  long plan_folders = 0;  // checkpoints/<job>/v<N> across the nodes
};

disk_use disk_of(const fs::path& dir) {
  disk_use d;
  std::error_code ec;
  static const std::regex plan_folder{"v[0-9]+"};
  for (fs::recursive_directory_iterator i{dir, ec}, end; !ec && i != end; i.increment(ec)) {
    std::error_code e;
    if (i->is_regular_file(e)) {
      d.bytes += i->file_size(e);
      ++d.files;
    } else if (i->is_directory(e) && i->path().parent_path().parent_path().filename() == "checkpoints" &&
               std::regex_match(i->path().filename().string(), plan_folder)) {
      ++d.plan_folders;
    }
  }
  return d;
}

// What the coordinator printed so far (read on from `offset`).
struct progress {
  std::size_t offset = 0;
  long iterations_printed = 0;
  long newest_iteration = 0;
  long plans = 0;
  bool failed = false;
  long first_after_mark = -1;  ///< the first iteration printed after mark() (-1: none yet)
  void mark() { first_after_mark = -1; marking = true; }
  bool marking = false;
  void read(const std::string& file) {
    std::ifstream in(file);
    in.seekg(static_cast<std::streamoff>(offset));
    std::string line;
    static const std::regex iteration{R"(^iteration ([0-9]+)/)"};
    static const std::regex plan{R"(^plan v[0-9]+: )"};
    std::smatch m;
    while (std::getline(in, line)) {
      if (in.eof())
        break;  // a line still being written: read it next time
      offset += line.size() + 1;
      if (std::regex_search(line, m, iteration)) {
        ++iterations_printed;
        newest_iteration = std::stol(m[1]);
        if (marking && first_after_mark < 0) {
          first_after_mark = newest_iteration;
          marking = false;
        }
      } else if (std::regex_search(line, plan) && line.find("predicted") == std::string::npos) {
        ++plans;
      } else if (line.rfind("training failed", 0) == 0) {
        failed = true;
      }
    }
  }
};

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// The coordinator and the nodes of the soak, over TCP on loopback, in `dir`.
struct soak_job {
  fs::path dir;
  std::string bin = SAILOR_BIN_DIR, configs = std::string(SAILOR_SOURCE_DIR) + "/configs";
  std::string port = std::to_string(20000 + ::getpid() % 20000);
  process coordinator;
  std::vector<process> nodes;

  int quorum = 0;
  void start(int count) {
    quorum = count;
    start_coordinator();
    nodes.resize(static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k)
      start_node(k);
  }
  // The same command each time: a coordinator started again continues the job.
  void start_coordinator() {
    coordinator.start({bin + "/sailor", "coordinator", "--planner", "even", "--listen", "127.0.0.1:" + port,
                       "--cluster", configs + "/clusters/local-2-zones.yaml", "--model",
                       configs + "/models/tiny.yaml", "--job", configs + "/jobs/tiny.yaml", "--quorum",
                       std::to_string(quorum), "--settle-s", "10", "--heartbeat-ms", "200",
                       "--heartbeat-timeout-ms", "3000", "--peer-timeout-s", "20", "--transport", "tcp",
                       "--train-dir", (dir / "train").string(), "--iterations", "100000000"},
                      (dir / "coordinator.out").string(), (dir / "coordinator.err").string());
  }
  void start_node(int k) {
    const std::string name = "soak-" + std::to_string(k);
    nodes[k].start({bin + "/sailor-node", "--join", "127.0.0.1:" + port, "--zone", k % 2 ? "local-b" : "local-a",
                    "--devices", "cpu:1", "--name", name, "--transport", "tcp", "--state-dir",
                    (dir / "state" / name).string(), "--log-dir", (dir / "logs").string(), "--join-timeout", "60"},
                   (dir / (name + ".out")).string(), (dir / (name + ".err")).string());
  }
  void stop() {
    for (auto& n : nodes)
      n.stop(SIGTERM, std::chrono::seconds{20});
    coordinator.stop(SIGTERM, std::chrono::seconds{20});
  }
};

// Stalls: no new iteration printed for longer than the limit (not counting the start-up).
struct stall_watch {
  double limit_s = 20;
  long stalls = 0, last_seen = -1;
  double longest_gap = 0, stall_total = 0;
  clock_type::time_point last_progress = clock_type::now();
  bool in_stall = false;

  void observe(const progress& p) {
    if (p.iterations_printed != last_seen) {
      // The wait for the first iteration is the job's start-up, not a gap between iterations.
      if (last_seen > 0)
        longest_gap = std::max(longest_gap, seconds_since(last_progress));
      last_seen = p.iterations_printed;
      if (in_stall)
        stall_total += seconds_since(last_progress);
      last_progress = clock_type::now();
      in_stall = false;
    } else if (!in_stall && p.iterations_printed > 0 && seconds_since(last_progress) > limit_s) {
      in_stall = true;
      ++stalls;
      std::printf("soak: stall: no iteration for %.0f s (after iteration %ld, plan %ld)\n", limit_s,
                  p.newest_iteration, p.plans);
    }
  }
  void finish() {
    if (in_stall)
      stall_total += seconds_since(last_progress);
  }
};

// The coordinator's RSS and descriptors and the state folders' disk use: first, peak, last.
struct resource_watch {
  long rss_first = -1, rss_max = 0, fds_first = -1, fds_max = 0;
  std::uintmax_t disk_max = 0;
  long plan_folders_max = 0;

  void sample(pid_t coordinator, const fs::path& state, const progress& p, const stall_watch& w,
              long kills, clock_type::time_point begin) {
    const long rss = proc_status_kib(coordinator, "VmRSS");
    const long fds = open_fds(coordinator);
    const auto disk = disk_of(state);
    if (rss_first < 0 && p.iterations_printed > 0) {
      rss_first = rss;
      fds_first = fds;
    }
    rss_max = std::max(rss_max, rss);
    fds_max = std::max(fds_max, fds);
    disk_max = std::max(disk_max, disk.bytes);
    plan_folders_max = std::max(plan_folders_max, disk.plan_folders);
    std::printf("%7.0f %10ld %6ld %6ld %7ld %9.1f %5ld %9.1f %6ld %8ld\n", seconds_since(begin), p.newest_iteration,
                p.plans, kills, w.stalls, rss / 1024.0, fds, static_cast<double>(disk.bytes) / (1 << 20), disk.files,
                disk.plan_folders);
    std::fflush(stdout);
  }
  void summary(pid_t coordinator, const fs::path& state) const {
    const long rss_end = proc_status_kib(coordinator, "VmRSS");
    const long fds_end = open_fds(coordinator);
    const auto disk_end = disk_of(state);
    std::printf("soak summary: coordinator RSS %.1f -> %.1f MiB (max %.1f), descriptors %ld -> %ld "
                "(max %ld); state folders %.1f MiB, %ld files, %ld plan folders at the end (max "
                "%.1f MiB, %ld plan folders)\n",
                rss_first / 1024.0, rss_end / 1024.0, rss_max / 1024.0, fds_first, fds_end, fds_max,
                static_cast<double>(disk_end.bytes) / (1 << 20), disk_end.files, disk_end.plan_folders,
                static_cast<double>(disk_max) / (1 << 20), plan_folders_max);
  }
};

// The coordinator's restarts: from each to the next iteration, and what was run again.
struct restart_watch {
  long restarts = 0, run_again = 0, newest_before = 0;
  double longest_s = 0;
  bool waiting = false;
  clock_type::time_point started{};

  void restarted(progress& p) {
    ++restarts;
    newest_before = p.newest_iteration;
    p.mark();
    waiting = true;
    started = clock_type::now();
  }
  void observe(const progress& p) {
    if (!waiting || p.first_after_mark < 0)
      return;
    waiting = false;
    const double s = seconds_since(started);
    const long again = std::max(0L, newest_before - (p.first_after_mark - 1));
    longest_s = std::max(longest_s, s);
    run_again += again;
    std::printf("soak: coordinator restarted: iteration %ld after %.2f s (the last before the kill: "
                "%ld; %ld run again)\n",
                p.first_after_mark, s, newest_before, again);
  }
};

int run(const soak_args& a) {
  soak_job job;
  job.dir = a.dir.empty() ? fs::temp_directory_path() / ("sailor-soak-" + std::to_string(::getpid())) : fs::path{a.dir};
  fs::create_directories(job.dir / "logs");
  ::setenv("SAILOR_TOKEN", "soak-bench-token-5c1e", 1);
  job.start(a.nodes);
  std::mt19937 rng{a.seed};
  std::uniform_real_distribution<double> gap{a.min_gap_s, a.max_gap_s};
  std::uniform_int_distribution<int> pick{0, a.nodes - 1};
  auto after_gap = [&] {
    return clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(gap(rng)));
  };
  const auto begin = clock_type::now();
  auto next_kill = after_gap(), next_print = begin;
  progress p;
  stall_watch stalls{a.stall_s};
  resource_watch resources;
  restart_watch restarts;
  long kills = 0;
  std::printf("soak: %.1f min, %d nodes, a kill and restart every %.0f-%.0f s, in %s\n", a.minutes, a.nodes,
              a.min_gap_s, a.max_gap_s, job.dir.c_str());
  std::printf("%7s %10s %6s %6s %7s %9s %5s %9s %6s %8s\n", "t_s", "iteration", "plans", "kills", "stalls",
              "rss_MiB", "fds", "disk_MiB", "files", "plan_dirs");
  while (seconds_since(begin) < a.minutes * 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds{500});
    p.read((job.dir / "coordinator.out").string());
    if (p.failed) {
      std::printf("soak: training failed (see %s/coordinator.out)\n", job.dir.c_str());
      break;
    }
    stalls.observe(p);
    restarts.observe(p);
    if (clock_type::now() >= next_kill) {
      ++kills;
      if (a.coordinator_every > 0 && kills % a.coordinator_every == 0) {
        job.coordinator.stop(SIGKILL, std::chrono::seconds{5});
        p.read((job.dir / "coordinator.out").string());  // what it printed before it died
        job.start_coordinator();
        restarts.restarted(p);
      } else {
        const int k = pick(rng);
        job.nodes[k].stop(SIGKILL, std::chrono::seconds{5});
        job.start_node(k);
      }
      next_kill = after_gap();
    }
    if (clock_type::now() >= next_print) {
      next_print += std::chrono::seconds{10};
      resources.sample(job.coordinator.pid, job.dir / "state", p, stalls, kills, begin);
    }
  }
  stalls.finish();
  std::printf("soak summary: %.1f min, %ld kills, %ld plans (re-plans %ld), newest iteration %ld, "
              "%ld stalls over %.0f s (%.0f s in all), longest gap between iterations %.1f s\n",
              seconds_since(begin) / 60, kills, p.plans, std::max(0L, p.plans - 1), p.newest_iteration,
              stalls.stalls, a.stall_s, stalls.stall_total, stalls.longest_gap);
  if (a.coordinator_every > 0)
    std::printf("soak summary: %ld coordinator restarts, the longest %.2f s to the next iteration, "
                "%ld completed iterations run again\n",
                restarts.restarts, restarts.longest_s, restarts.run_again);
  resources.summary(job.coordinator.pid, job.dir / "state");
  job.stop();
  if (a.dir.empty())
    fs::remove_all(job.dir);
  return stalls.stalls == 0 && !p.failed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"soak: kill and restart a node every 20-40 s while training; print re-plans, "
               "stalls, RSS, descriptors and disk use over time"};
  soak_args a;
  app.add_option("--minutes", a.minutes, "how long")->capture_default_str();
  app.add_option("--nodes", a.nodes, "sailor-node processes")->capture_default_str();
  app.add_option("--min-gap-s", a.min_gap_s, "shortest time between kills")->capture_default_str();
  app.add_option("--max-gap-s", a.max_gap_s, "longest time between kills")->capture_default_str();
  app.add_option("--stall-s", a.stall_s, "no iteration for this long is a stall")
    ->capture_default_str();
  app.add_option("--dir", a.dir, "keep the processes' folders and logs here (default: a "
                                 "temporary folder, removed at the end)");
  app.add_option("--seed", a.seed, "random seed of the kill schedule")->capture_default_str();
  app.add_option("--coordinator-every", a.coordinator_every,
                 "every K-th kill is the coordinator's, started again at once on its train folder "
                 "(0: never)")
    ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (a.nodes < 2 || a.min_gap_s <= 0 || a.max_gap_s < a.min_gap_s || a.minutes <= 0 ||
      a.coordinator_every < 0) {
    std::fprintf(stderr, "soak: --nodes must be at least 2 and 0 < --min-gap-s <= --max-gap-s\n");
    return 2;
  }
  return run(a);
}
