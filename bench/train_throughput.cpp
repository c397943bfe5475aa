// Training throughput of our runtime against PyTorch DistributedDataParallel on the same
// model, batch and number of processes (2 data-parallel ranks on this machine, Gloo on
// 127.0.0.1, one torch thread per rank), printed as tokens/s and a ratio (target >= 1.0).
//
//   train_throughput [--iterations N] [--warmup N] [--layers L] [--hidden H]
//                          [--heads A] [--sequence S] [--vocabulary V] [--batch B]
//                          [--rounds R] [--no-ddp] [--opt350m]
//
// --opt350m trains OPT-350M's shape (24 layers, hidden 1024, vocabulary 50272) at its
// sequence of 2048 unless --sequence is given (at 2048 its activations do not fit a small
// machine's memory).
//
// The parent starts itself twice as `--rank r --store DIR` (the ranks meet through a Gloo
// FileStore in DIR), then runs scripts/ddp_reference.py with /usr/bin/python3.
//
// The machine is shared, so one pair of runs proves little: R rounds (default 7) each run
// both sides back to back, alternating which goes first, and the bench reports the median of
// the per-round ratios with their spread (min..max), by wall time and by CPU time.

#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>
#include <sailor/simulator/correction.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using namespace sailor;
using simulator::median_of;

struct bench_config {
  int iterations = 10;
  int warmup = 2;
  int layers = 4;
  int hidden = 128;
  int heads = 8;
  int sequence = 64;
  int vocabulary = 4096;
  int rounds = 7;
  int batch = 16;  // global batch; each of the 2 ranks runs batch / 2 in one micro-batch
  bool ddp = true;
  bool opt350m = false;
  int rank = -1;
  std::string store;
};

config::model_shape shape_of(const bench_config& c) {
  if (c.opt350m) {
    auto m = models::opt_350m_shape();
    m.sequence = c.sequence;  // OPT-350M's 2048 unless --sequence says otherwise
    return m;
  }
  config::model_shape m = models::tiny_gpt_shape();
  m.name = "bench-gpt";
  m.num_layers = c.layers;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.sequence = c.sequence;
  m.vocabulary = c.vocabulary;
  return m;
}

config::plan dp2_plan(const config::model_shape& m, int batch) {
  config::plan p;
  p.global_batch = batch;
  p.micro_batch = batch / 2;
  config::stage_plan s;
  s.first_layer = 0;
  s.num_layers = m.num_all_layers();
  config::replica r;
  r.gpu_type = "cpu";
  s.replicas = {r, r};
  p.stages = {s};
  return p;
}

train::train_options options_of() {
  train::train_options o;
  o.seed = 1;
  o.learning_rate = 1e-3;
  o.clip_norm = 1.0;
  o.torch_threads = 1;
  return o;
}

// One rank: trains and, on rank 0, writes tokens/s and the last loss to DIR/result.
int run_rank(const bench_config& c) {
  auto model = shape_of(c);
  auto plan = dp2_plan(model, c.batch);
  comm::gloo_options gopts;
  gopts.store_path = c.store;
  auto factory = comm::make_gloo_factory(c.rank, gopts);
  if (!factory) {
    std::cerr << factory.error().to_string() << "\n";
    return 1;
  }
  auto exec = train::stage_executor::create(model, plan, train::role_of(plan, c.rank), **factory,
                                            options_of());
  if (!exec) {
    std::cerr << exec.error().to_string() << "\n";
    return 1;
  }
  double seconds = 0, compute = 0, reduce = 0, optimizer = 0, loss = 0;
  std::clock_t cpu_start = 0;
  for (int it = 0; it < c.warmup + c.iterations; ++it) {
    if (it == c.warmup) cpu_start = std::clock();
    auto tel = (*exec)->run_iteration(it);
    if (!tel) {
      std::cerr << tel.error().to_string() << "\n";
      return 1;
    }
    if (it >= c.warmup) {
      seconds += tel->total_s;
      compute += tel->compute_s;
      reduce += tel->all_reduce_s;
      optimizer += tel->optimizer_s;
    }
    loss = tel->loss;
  }
  if (c.rank == 0) {
    std::ofstream out(c.store + "/result");
    double tokens = static_cast<double>(c.batch) * model.sequence * c.iterations;
    out << tokens / seconds << " " << seconds / c.iterations << " " << compute / c.iterations
        << " " << reduce / c.iterations << " " << loss << " "
        << static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC / c.iterations << " "
        << optimizer / c.iterations << "\n";
  }
  return 0;
}

int spawn_and_wait(const std::vector<std::string>& args, std::vector<pid_t>& pids) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  pids.push_back(pid);
  return 0;
}

std::vector<std::string> common_args(const bench_config& c) {
  return {"--iterations", std::to_string(c.iterations), "--warmup", std::to_string(c.warmup),
          "--layers", std::to_string(c.layers), "--hidden", std::to_string(c.hidden),
          "--heads", std::to_string(c.heads), "--sequence", std::to_string(c.sequence),
          "--vocabulary", std::to_string(c.vocabulary), "--batch", std::to_string(c.batch)};
}


struct run_figures {
  double tokens_per_s = 0, iteration_s = 0, compute_s = 0, all_reduce_s = 0, loss = 0;
  double cpu_s = 0;  ///< process CPU time per iteration of rank 0 (all its threads)
  double optimizer_s = 0;  ///< ours: norm, clipping, step; DDP: clip_grad_norm_ and step
  double forward_s = 0, backward_s = 0;  ///< DDP only (its backward holds the all-reduce)
};

// The 1-minute load average of the machine (what else competes for its cores).
double load_average() {
  double load = -1;
  std::ifstream in("/proc/loadavg");
  in >> load;
  return load;
}

// Our runtime: this program started twice as ranks meeting in a fresh store folder.
std::optional<run_figures> run_ours(const bench_config& c) {
  auto dir = std::filesystem::temp_directory_path() /
             ("sailor_bench_train_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  bool ok = true;
  for (int r = 0; r < 2 && ok; ++r) {
    std::vector<std::string> args = {std::filesystem::read_symlink("/proc/self/exe").string(),
                                     "--rank", std::to_string(r), "--store", dir.string()};
    for (auto& a : common_args(c)) args.push_back(a);
    if (c.opt350m) args.push_back("--opt350m");
    ok = spawn_and_wait(args, pids) == 0;
  }
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  run_figures f;
  std::ifstream in(dir / "result");
  ok = ok && static_cast<bool>(in >> f.tokens_per_s >> f.iteration_s >> f.compute_s >>
                               f.all_reduce_s >> f.loss >> f.cpu_s >> f.optimizer_s);
  std::filesystem::remove_all(dir);
  if (!ok) return std::nullopt;
  return f;
}

std::optional<run_figures> run_ddp(const bench_config& c) {
  std::string cmd = "GLOO_SOCKET_IFNAME=lo /usr/bin/python3 " SAILOR_SOURCE_DIR
                    "/scripts/ddp_reference.py";
  for (auto& a : common_args(c)) cmd += " " + a;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return std::nullopt;
  run_figures f;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::sscanf(line, "ddp_tokens_per_s %lf %lf %lf", &f.tokens_per_s, &f.iteration_s, &f.cpu_s);
    std::sscanf(line, "ddp_phases %lf %lf %lf", &f.forward_s, &f.backward_s, &f.optimizer_s);
  }
  if (pclose(pipe) != 0 || f.tokens_per_s <= 0) return std::nullopt;
  return f;
}

// The command line; nullopt after an unknown argument (said on stderr).
std::optional<bench_config> parse_args(int argc, char** argv) {
  bench_config c;
  bool sequence_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--iterations") c.iterations = std::stoi(next());
    else if (a == "--warmup") c.warmup = std::stoi(next());
    else if (a == "--layers") c.layers = std::stoi(next());
    else if (a == "--hidden") c.hidden = std::stoi(next());
    else if (a == "--heads") c.heads = std::stoi(next());
    else if (a == "--sequence") c.sequence = std::stoi(next()), sequence_given = true;
    else if (a == "--vocabulary") c.vocabulary = std::stoi(next());
    else if (a == "--batch") c.batch = std::stoi(next());
    else if (a == "--rounds") c.rounds = std::stoi(next());
    else if (a == "--rank") c.rank = std::stoi(next());
    else if (a == "--store") c.store = next();
    else if (a == "--no-ddp") c.ddp = false;
    else if (a == "--opt350m") c.opt350m = true;
    else {
      std::cerr << "unknown argument " << a << "\n";
      return std::nullopt;
    }
  }
  if (c.opt350m) {
    auto m = models::opt_350m_shape();
    c.layers = m.num_layers, c.hidden = m.hidden, c.heads = m.heads;
    if (!sequence_given) c.sequence = m.sequence;
    c.vocabulary = m.vocabulary;
  }
  return c;
}

// What the rounds measured: each side's runs, the per-round ratios and the load at each start.
struct rounds {
  std::vector<run_figures> ours, ddp;
  std::vector<double> wall_ratios, cpu_ratios, loads;
};

// Rounds: both sides back to back, the order alternating, so that both see the same background
// load. False when a side failed (said on stderr).
bool run_rounds(const bench_config& c, rounds& out) {
  for (int round = 0; round < c.rounds; ++round) {
    std::optional<run_figures> ours, ddp;
    out.loads.push_back(load_average());
    const bool ddp_first = c.ddp && round % 2 == 1;
    if (ddp_first) ddp = run_ddp(c);
    ours = run_ours(c);
    if (!ours) {
      std::cerr << "sailor ranks failed\n";
      return false;
    }
    out.ours.push_back(*ours);
    if (!c.ddp) continue;
    if (!ddp_first) ddp = run_ddp(c);
    if (!ddp) {
      std::cerr << "ddp reference failed\n";
      return false;
    }
    out.ddp.push_back(*ddp);
    out.wall_ratios.push_back(ours->tokens_per_s / ddp->tokens_per_s);
    out.cpu_ratios.push_back(ddp->cpu_s / ours->cpu_s);
    std::fprintf(stderr, "round %d (load %.1f): sailor %.0f tokens/s (%.1f ms CPU), ddp %.0f tokens/s (%.1f ms CPU): ratio %.2f wall, %.2f CPU\n",
                 round + 1, out.loads.back(), ours->tokens_per_s, ours->cpu_s * 1e3, ddp->tokens_per_s,
                 ddp->cpu_s * 1e3, out.wall_ratios.back(), out.cpu_ratios.back());
  }
  return true;
}

std::string spread(const std::vector<double>& v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f..%.2f", *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return text;
}

// One field of every run, and its median, lowest and highest.
template <class Field>
std::vector<double> values(const std::vector<run_figures>& runs, Field field) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(field(r));
  return v;
}
template <class Field>
double pick(const std::vector<run_figures>& runs, Field field) { return median_of(values(runs, field)); }
double low(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double high(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void report(const bench_config& c, const rounds& r) {
  auto tps = [](const run_figures& x) { return x.tokens_per_s; };
  auto iter = [](const run_figures& x) { return x.iteration_s; };
  auto comp = [](const run_figures& x) { return x.compute_s; };
  auto ar = [](const run_figures& x) { return x.all_reduce_s; };
  auto opt = [](const run_figures& x) { return x.optimizer_s; };
  auto fwd = [](const run_figures& x) { return x.forward_s; };
  auto bwd = [](const run_figures& x) { return x.backward_s; };
  auto cpu = [](const run_figures& x) { return x.cpu_s; };
  std::printf("model: %d layers, hidden %d, heads %d, sequence %d, vocabulary %d; global batch %d "
              "on 2 data-parallel CPU processes (Gloo, 1 thread each); medians of %d rounds\n",
              c.layers, c.hidden, c.heads, c.sequence, c.vocabulary, c.batch, c.rounds);
  std::printf("load average (1 min) at the rounds' starts: median %.1f, %s, on %ld cores\n",
              median_of(r.loads), spread(r.loads).c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("sailor:  %10.0f tokens/s (spread %.0f..%.0f)  %.1f ms/iteration: compute %.1f ms, "
              "all-reduce %.1f ms, norm+clip+step %.1f ms; CPU %.1f ms/iteration on rank 0; loss %.3f\n",
              pick(r.ours, tps), low(values(r.ours, tps)), high(values(r.ours, tps)),
              pick(r.ours, iter) * 1e3, pick(r.ours, comp) * 1e3, pick(r.ours, ar) * 1e3,
              pick(r.ours, opt) * 1e3, pick(r.ours, cpu) * 1e3, r.ours.back().loss);
  if (!c.ddp) return;
  std::printf("ddp:     %10.0f tokens/s (spread %.0f..%.0f)  %.1f ms/iteration: forward %.1f ms, "
              "backward with all-reduce %.1f ms, clip+step %.1f ms; CPU %.1f ms/iteration on rank 0\n",
              pick(r.ddp, tps), low(values(r.ddp, tps)), high(values(r.ddp, tps)),
              pick(r.ddp, iter) * 1e3, pick(r.ddp, fwd) * 1e3, pick(r.ddp, bwd) * 1e3,
              pick(r.ddp, opt) * 1e3, pick(r.ddp, cpu) * 1e3);
  std::printf("ratio sailor/ddp (target >= 1.0): wall %.2f (median of %d rounds, spread %s); "
              "CPU time %.2f (spread %s)\n",
              median_of(r.wall_ratios), c.rounds, spread(r.wall_ratios).c_str(), median_of(r.cpu_ratios),
              spread(r.cpu_ratios).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  auto c = parse_args(argc, argv);
  if (!c) return 2;
  if (c->rank >= 0) return run_rank(*c);
  // Both sides run with the same thread settings: one OpenMP and one OpenBLAS thread per rank
  // (an OpenBLAS pool left at its default spins on the other core).
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  rounds r;
  if (!run_rounds(*c, r)) return 1;
  report(*c, r);
  return 0;
}
