#include "profile_command.hpp"

// Only with LibTorch: the profiler lives in sailor_train (train/).
#ifdef SAILOR_WITH_TRAIN

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "sailor/train/profiler.hpp"
#include "sailor/config/load.hpp"

namespace sailor::node {

namespace {

using clock_type = std::chrono::steady_clock;
using train::process_cpu_s;
using train::profile_options;

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    auto piece = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!piece.empty()) out.push_back(std::stoi(piece));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

namespace {

// What `sailor profile`'s command line asks for.
struct profile_args {
  std::string model_path, out_path, device = "cpu", host_path, ready_file, go_file;
  profile_options options;
};

// Parses the command line into `a`; an exit code when the command should end here (help, or
// bad input: 2).
std::optional<int> parse_args(const std::vector<std::string>& args, profile_args& a) {
  CLI::App app{"sailor profile: measure per-layer forward, backward and optimizer-step times of a "
               "model on this machine and write them as a profile (Sailor's profiles_tmp.json "
               "layout) that `sailor simulate`, `sailor plan` and `sailor demo` read",
               "sailor profile"};
  std::string micro_batches = "1,2,4,8", tps = "1", statistic = "median";
  profile_options& o = a.options;
  app.add_option("--model", a.model_path, "model YAML (configs/models/*.yaml)")->required();
  app.add_option("--out", a.out_path, "profile JSON to write")->required();
  app.add_option("--micro-batches", micro_batches, "micro-batch sizes, comma separated")
    ->capture_default_str();
  app.add_option("--tp", tps, "TP degrees, comma separated (TP ranks run as threads)")
    ->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed runs per measurement (median)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed runs first")->capture_default_str();
  app.add_option("--threads", o.torch_threads, "torch intra-op threads")->capture_default_str();
  app.add_option("--blas-threads", o.blas_threads,
                 "OpenBLAS threads of the matrix products (0: as --threads)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  app.add_option("--gpu-type", o.gpu_type, "GPU type to file the times under")->capture_default_str();
  app.add_option("--device", a.device, "cpu or cuda:N")->capture_default_str();
  app.add_option("--cold-cache-bytes", o.cold_cache_bytes,
                 "sweep this many bytes before each timed pass (a cache another process "
                 "just used); 0: warm")
    ->capture_default_str();
  app.add_flag("--cpu-clock", o.cpu_clock,
               "time passes by the thread's CPU time (its work), not the wall clock");
  app.add_option("--host-figures", a.host_path,
                 "also measure what the host gives CPU ranks (core share while profiling, CPU per "
                 "message and per gradient all-reduce) and write it to this JSON file");
  app.add_option("--ready-file", a.ready_file,
                 "create this file once the model is loaded (processes profiling together)");
  app.add_option("--go-file", a.go_file,
                 "then wait (up to 120 s) for this file before measuring, so that processes "
                 "profiling together measure at the same time");
  app.add_option("--statistic", statistic, "median (the layer's own time) or mean (expected "
                                           "time under the machine's current load)")
    ->check(CLI::IsMember({"median", "mean"}))
    ->capture_default_str();
  std::vector<const char*> argv{"sailor profile"};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    o.mean = statistic == "mean";
    o.micro_batches = parse_list(micro_batches);
    o.tp_degrees = parse_list(tps);
    if (a.device.rfind("cuda:", 0) == 0) {
      o.cuda_device = std::stoi(a.device.substr(5));
    } else if (a.device != "cpu") {
      throw CLI::ValidationError("--device", "expected cpu or cuda:N");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sailor profile: error: bad list: %s\n", e.what());
    return 2;
  }
  return std::nullopt;
}

// Waits (up to 120 s) for the go-ahead file of processes profiling together; false if it
// did not appear.
bool wait_for_go(const std::string& go_file) {
  const auto give_up = clock_type::now() + std::chrono::seconds{120};
  while (!std::ifstream(go_file) && clock_type::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds{5});  // polling the go-ahead file
  return static_cast<bool>(std::ifstream(go_file));
}

// Measures and writes the host's figures (--host-figures); an exit code.
int write_host_figures(const config::model_shape& model, const profile_args& a, double core_share) {
  auto host = train::measure_host_communication(model, a.options.micro_batches.front(), a.options);
  if (!host) {
    std::fprintf(stderr, "sailor profile: error: %s\n", host.error().to_string().c_str());
    return 1;
  }
  host->core_share = core_share;
  if (auto st = train::save_host_figures(*host, a.host_path)) {
    std::fprintf(stderr, "sailor profile: error: %s\n", st->to_string().c_str());
    return 1;
  }
  std::printf("sailor profile: host: %.2f of a core while profiling; CPU %.1f us per message, "
              "%.1f us per gradient all-reduce; written to %s\n",
              host->core_share, host->cpu_per_message_s * 1e6, host->cpu_per_collective_s * 1e6,
              a.host_path.c_str());
  return 0;
}

// The profile as a table: per micro-batch size and TP degree, the embedding, a block and the
// head's times.
void print_profile(const config::model_shape& model, const config::model_profile& profile, const profile_args& a,
                   double took) {
  const profile_options& o = a.options;
  std::printf("sailor profile: %s on %s (%d torch threads), %.1f s\n", model.name.c_str(),
              o.cuda_device >= 0 ? a.device.c_str() : "cpu", o.torch_threads, took);
  std::printf("  %4s %3s  %-10s %12s %12s %12s\n", "mbs", "tp", "layer", "forward ms", "backward ms",
              "update ms");
  const auto& gp = profile.by_gpu.at(o.gpu_type);
  for (const auto& [mbs, by_tp] : gp.times)
    for (const auto& [tp, layers] : by_tp) {
      const int L = model.num_layers;
      const std::pair<const char*, int> rows[3] = {{"embedding", 0}, {"block", 1}, {"head+loss", L + 1}};
      for (const auto& [name, l] : rows)
        std::printf("  %4d %3d  %-10s %12.3f %12.3f %12.3f\n", mbs, tp, name,
                    layers[l].forward_s * 1e3, layers[l].backward_s * 1e3, layers[l].update_s * 1e3);
    }
  std::printf("  written to %s\n", a.out_path.c_str());
}

}  // namespace

int profile_command(const std::vector<std::string>& args) {
  profile_args a;
  if (auto code = parse_args(args, a)) return *code;
  auto model = config::load_model(a.model_path);
  if (!model) {
    std::fprintf(stderr, "sailor profile: error: %s\n", model.error().to_string().c_str());
    return 2;
  }
  if (!a.ready_file.empty()) std::ofstream(a.ready_file) << "ready\n";
  if (!a.go_file.empty() && !wait_for_go(a.go_file)) {
    std::fprintf(stderr, "sailor profile: error: %s did not appear within 120 s\n", a.go_file.c_str());
    return 1;
  }
  const auto start = clock_type::now();
  const double cpu_start = process_cpu_s();
  auto profile = train::profile_model(*model, a.options);
  // The share of a core over the profile alone (one thread always busy); the communication
  // measured next mostly waits between its two ranks, which is no sign of a busy host.
  const double profile_cpu = process_cpu_s() - cpu_start;
  const double profile_wall = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!profile) {
    std::fprintf(stderr, "sailor profile: error: %s\n", profile.error().to_string().c_str());
    return profile.error().kind == error_kind::invalid_input ? 2 : 1;
  }
  std::ofstream out(a.out_path);
  out << config::to_profile_json(*profile) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "sailor profile: error: cannot write %s\n", a.out_path.c_str());
    return 1;
  }
  const double took = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!a.host_path.empty()) {
    // Up to one core per compute thread (the profile's helper threads work too).
    const double most = std::max({1, a.options.torch_threads, a.options.blas_threads});
    const double share = profile_wall > 0 ? std::min(most, profile_cpu / profile_wall) : 0;
    if (int code = write_host_figures(*model, a, share)) return code;
  }
  print_profile(*model, *profile, a, took);
  return 0;
}

}  // namespace sailor::node

#endif  // SAILOR_WITH_TRAIN
