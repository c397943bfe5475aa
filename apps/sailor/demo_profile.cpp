#include "demo_profile.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <functional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "sailor/config/load.hpp"

namespace sailor::app {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// Whether `p` has times for gpu type CPU at each micro-batch of `sizes` and every TP degree
// in `tps`.
bool covers(const config::model_profile& p, const std::set<int>& sizes, const std::set<int>& tps) {
  const auto* gp = p.find("CPU");
  if (!gp) return false;
  for (int mbs : sizes)
    for (int tp : tps)
      if (!gp->find(mbs, tp)) return false;
  return true;
}

// The micro-batch sizes to measure: the plan's and the request's.
std::set<int> sizes_of(const profile_request& args, const config::plan& p) {
  std::set<int> out(args.micro_batches.begin(), args.micro_batches.end());
  out.insert(std::max(1, p.micro_batch));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Per layer, the median over `copies` of forward, backward and update times.
config::model_profile median_profile(const std::vector<config::model_profile>& copies) {
  config::model_profile out = copies.front();
  for (auto& [gpu, gp] : out.by_gpu)
    for (auto& [mbs, by_tp] : gp.times)
      for (auto& [tp, layers] : by_tp)
        for (std::size_t l = 0; l < layers.size(); ++l) {
          std::vector<double> f, b, u;
          for (const auto& c : copies) {
            const auto* g = c.find(gpu);
            const auto* ls = g ? g->find(mbs, tp) : nullptr;
            if (!ls || ls->size() != layers.size())
              continue;
            f.push_back((*ls)[l].forward_s);
            b.push_back((*ls)[l].backward_s);
            u.push_back((*ls)[l].update_s);
          }
          layers[l] = {median(f), median(b), median(u)};
        }
  return out;
}

}  // namespace

std::string profile_cache_file(const std::string& dir, const std::string& device_type,
                               const std::string& model_file, const std::string& node_binary) {
  if (dir.empty())
    return {};
  std::ifstream in(model_file);
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ec;
  const auto size = fs::file_size(node_binary, ec);
  const auto time = fs::last_write_time(node_binary, ec).time_since_epoch().count();
  const std::string build = std::to_string(ec ? 0 : size) + ":" + std::to_string(ec ? 0 : time);
  char name[160];
  std::snprintf(name, sizeof name, "profile-%s-%016zx-%016zx.json", device_type.c_str(),
                std::hash<std::string>{}(text.str()), std::hash<std::string>{}(build));
  return (fs::path{dir} / name).string();
}

namespace {

// The TP degrees of the plan's replicas, and its number of ranks.
struct plan_shape {
  std::set<int> tps;
  int ranks = 0;
};

plan_shape shape_of(const config::plan& p) {
  plan_shape out;
  for (const auto& s : p.stages)
    for (const auto& r : s.replicas) {
      out.tps.insert(std::max(1, r.tp));
      out.ranks += std::max(1, r.tp);
    }
  return out;
}

// The cached profile at `file` with its host figures, when it covers the plan and was measured
// by as many processes at once as the plan has ranks (the cores each gets depend on how many
// share them).
std::optional<measured_profile> cached_profile(const std::string& file, const config::plan& p,
                                               const plan_shape& shape, const std::set<int>& sizes) {
  if (file.empty() || !fs::exists(file)) return std::nullopt;
  auto cached = simulator::load_measured_profile(file);
  if (!cached || (cached->ranks != 0 && cached->ranks != std::max(1, shape.ranks)) ||
      !covers(cached->profile, sizes, shape.tps))
    return std::nullopt;
  return std::move(*cached);
}

// One `sailor-node profile` process per rank, each waiting for the go-ahead file.
result<std::vector<child>> spawn_profilers(const profile_request& args,
                                           const std::string& node_binary, const fs::path& work,
                                           const config::plan& p, const plan_shape& shape) {
  std::string tp_list, mbs_list;
  for (int tp : shape.tps)
    tp_list += (tp_list.empty() ? "" : ",") + std::to_string(tp);
  for (int mbs : sizes_of(args, p))
    mbs_list += (mbs_list.empty() ? "" : ",") + std::to_string(mbs);
  // One thread a rank: the CPU work of the pass (its thread's clock), caches left cold by
  // the other ranks that share the cores. More: the wall clock of processes measuring
  // together, as the ranks compute together (a thread's clock misses its helpers' work).
  std::vector<std::string> clock_args{"--cpu-clock", "--cold-cache-bytes", "4194304"};
  if (args.threads > 1) clock_args.clear();
  // A go-ahead or ready file left by an earlier measurement (another count of processes)
  // would start these before all are loaded.
  std::error_code ec;
  fs::remove(work / "profile.go", ec);
  std::vector<child> procs;
  for (int k = 0; k < std::max(1, shape.ranks); ++k) {
    child c;
    c.name = "profile-" + std::to_string(k);
    fs::remove(work / (c.name + ".ready"), ec);
    c.log = (work / (c.name + ".log")).string();
    std::vector<std::string> argv{
      node_binary, "profile", "--model", args.model, "--out", (work / (c.name + ".json")).string(),
      "--micro-batches", mbs_list, "--tp", tp_list, "--repeats", "40", "--warmup", "5",
      "--threads", "1", "--blas-threads", std::to_string(std::max(1, args.threads)),
      "--statistic", "mean",
      "--host-figures", (work / (c.name + ".host.json")).string(), "--ready-file",
      (work / (c.name + ".ready")).string(), "--go-file", (work / "profile.go").string()};
    argv.insert(argv.end(), clock_args.begin(), clock_args.end());
    c.pid = spawn(argv, c.log);
    if (c.pid < 0) {
      stop_children(procs, std::chrono::milliseconds{0});
      return sailor::error::failed("cannot start " + node_binary + " profile");
    }
    procs.push_back(c);
  }
  return procs;
}

// Gives the go-ahead once every process has loaded the model (they measure together), and
// waits for them all, at most 120 s.
status run_profilers(std::vector<child>& procs, const fs::path& work) {
  const auto deadline = clock_type::now() + std::chrono::seconds{120};
  auto running = [&] {
    reap(procs);
    for (const auto& c : procs)
      if (c.exit_code == -1)
        return true;
    return false;
  };
  bool go = false;
  while (running() && clock_type::now() < deadline) {
    if (!go && std::any_of(procs.begin(), procs.end(), [](const child& c) { return c.exit_code > 0; })) {
      stop_children(procs, std::chrono::milliseconds{0});  // one failed: the others would wait
      break;
    }
    if (!go) {
      go = std::all_of(procs.begin(), procs.end(),
                       [&](const child& c) { return fs::exists(work / (c.name + ".ready")); });
      if (go)
        std::ofstream(work / "profile.go") << "go\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{go ? 20 : 5});  // polling the children
  }
  if (running()) {
    stop_children(procs, std::chrono::milliseconds{0});
    return sailor::error::failed("profiling took over 120 s");
  }
  return {};
}

// The processes' profiles and host figures, each the median over the processes.
result<measured_profile> collect_profiles(const std::vector<child>& procs, const fs::path& work) {
  std::vector<config::model_profile> copies;
  std::vector<double> shares, per_message, per_collective;
  // When one process fails, run_profilers stops the others, so several may have ended
  // badly: the one to name is the one that said why (the others' logs are empty).
  const child* failed = nullptr;
  for (const auto& c : procs)
    if (c.exit_code != 0 && (!failed || tail_of(failed->log, 400).empty()))
      failed = &c;
  if (failed)
    return sailor::error::of(error_kind::failed, failed->log, "",
                             "profiling failed: " + tail_of(failed->log, 400));
  for (const auto& c : procs) {
    auto one = config::load_profile_json((work / (c.name + ".json")).string());
    if (!one)
      return one.error();
    copies.push_back(std::move(*one));
    const std::string host_path = (work / (c.name + ".host.json")).string();
    try {
      std::ifstream in(host_path);
      auto j = nlohmann::json::parse(in);
      shares.push_back(j.at("core_share").get<double>());
      per_message.push_back(j.at("cpu_per_message_s").get<double>());
      per_collective.push_back(j.at("cpu_per_collective_s").get<double>());
    } catch (const std::exception& e) {
      return sailor::error::of(error_kind::failed, host_path, "",
                               std::string("host figures: ") + e.what());
    }
  }
  measured_profile m;
  m.profile = median_profile(copies);
  // The processes do not all finish together, and the last ones get the cores the first
  // left: the median share is the one they had while all ran.
  const double cores = median(shares) * static_cast<double>(shares.size());
  const unsigned hw = std::thread::hardware_concurrency();
  m.host_cores = hw > 0 ? std::min(cores, static_cast<double>(hw)) : cores;
  m.cpu_per_message_s = median(per_message);
  m.cpu_per_collective_s = median(per_collective);
  return m;
}

// Writes the profile to `out` and its host figures to `out`.host.json.
status write_profile(const measured_profile& m, const std::string& out, int ranks) {
  std::ofstream file(out);
  file << config::to_profile_json(m.profile) << "\n";
  nlohmann::json host;
  host["host_cores"] = m.host_cores;
  host["cpu_per_message_s"] = m.cpu_per_message_s;
  host["cpu_per_collective_s"] = m.cpu_per_collective_s;
  host["ranks"] = std::max(1, ranks);
  std::ofstream host_file(out + ".host.json");
  host_file << host.dump(1) << "\n";
  if (!file || !host_file)
    return sailor::error::of(error_kind::failed, out, "", "cannot write the profile");
  return {};
}

// The cache file of the profile measured by `ranks` processes at once.
std::string cache_file_for(const profile_request& args, const std::string& node_binary, int ranks) {
  return profile_cache_file(args.cache_dir,
                            args.device_type + "-" + std::to_string(ranks) + "ranks-" +
                              std::to_string(std::max(1, args.threads)) + "threads",
                            args.model, node_binary);
}

// The profile measured by `shape.ranks` processes at once: the one at `file` when it covers
// the plan, else measured and written there (`work`/profile.json when "").
result<measured_profile> profile_at(const std::string& file, const profile_request& args,
                                    const std::string& node_binary, const fs::path& work,
                                    const config::plan& p, const plan_shape& shape) {
  if (auto cached = cached_profile(file, p, shape, sizes_of(args, p)))
    return *cached;
  if (args.cached_only)
    return sailor::error::failed("no cached profile for " + std::to_string(shape.ranks) +
                                 " processes at once");
  auto procs = spawn_profilers(args, node_binary, work, p, shape);
  if (!procs)
    return procs.error();
  if (auto err = run_profilers(*procs, work))
    return *err;
  auto m = collect_profiles(*procs, work);
  if (!m)
    return m.error();
  const std::string out = file.empty() ? (work / "profile.json").string() : file;
  if (auto err = write_profile(*m, out, shape.ranks))
    return *err;
  return m;
}

// Counts of processes looked for in the cache (far more than this machine's cores).
constexpr int most_ranks_cached = 64;

// The host model of `m`, measured by `ranks` processes at once, from the profile of every
// other count cached for the same model and build (simulator::add_host_model).
void add_host_model(measured_profile& m, const profile_request& args,
                    const std::string& node_binary, int ranks, int mbs) {
  m.ranks = ranks;
  std::vector<measured_profile> others;
  for (int k = 1; k <= most_ranks_cached && !args.cache_dir.empty(); ++k) {
    const auto file = cache_file_for(args, node_binary, k);
    std::error_code ec;
    if (k == ranks || !fs::exists(file, ec))
      continue;
    auto other = simulator::load_measured_profile(file);
    if (!other || (other->ranks != 0 && other->ranks != k))
      continue;
    other->ranks = k;
    others.push_back(std::move(*other));
  }
  simulator::add_host_model(m, others, args.device_type, mbs);
}

}  // namespace

// The model's profile for plan `p` on this machine: the cached file (and its .host.json) when
// it covers the plan, else measured by `sailor-node profile` (bounded) and written to the
// cache (or `work`). The nodes train one single-threaded rank each, as many ranks as the plan
// has, on this machine's cores. The profile holds each pass's CPU work (the profiling
// thread's CPU time), measured by as many processes at once as the plan has ranks (the same
// cache and memory pressure; the median of their times is kept, each the mean of its
// repeats), each pass starting with caches another process used (a rank gets its core back
// after waiting for a transfer, while others ran; 4 MiB is this machine's L2). The cores the
// ranks get together are what the profiling processes got: the median of their CPU time over
// wall time, times their number (at most this machine's cores; less when other work loads
// the machine). Each process also measures the CPU a message and a gradient all-reduce cost
// on loopback (the median is kept). The simulator shares those cores among the ranks.
//
// Plans of another count of ranks (the search weighs them all) are predicted with the host
// model: one process alone is measured too (the reference without contention), and the pass's
// work of every count cached scales the profile's times to the candidate's count.
result<measured_profile> obtain_profile(const profile_request& args, const std::string& node_binary,
                                        const fs::path& work, const config::plan& p) {
  const auto shape = shape_of(p);
  const bool by_count = args.profile.empty() && !args.cache_dir.empty();
  std::string file = args.profile;
  if (by_count) {
    std::error_code ec;
    fs::create_directories(args.cache_dir, ec);
    file = cache_file_for(args, node_binary, shape.ranks);
  }
  auto m = profile_at(file, args, node_binary, work, p, shape);
  if (!m || !by_count)
    return m;
  if (shape.ranks > 1 && !args.cached_only) {
    const plan_shape alone{shape.tps, 1};
    auto one = profile_at(cache_file_for(args, node_binary, 1), args, node_binary, work, p, alone);
    if (!one)
      std::fprintf(stderr, "  warning: no profile of one process alone (%s): plans of fewer "
                           "ranks are predicted at the speed of %d sharing the host\n",
                   one.error().message.c_str(), shape.ranks);
  }
  add_host_model(*m, args, node_binary, shape.ranks, p.micro_batch);
  return m;
}

}  // namespace sailor::app
