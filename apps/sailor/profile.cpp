// `sailor profile`: measures per-layer forward, backward and optimizer-step times of a model
// on this machine and writes them as a profile the simulator reads (Sailor's
// profiles_tmp.json layout, see config/profile.hpp).
//
// The measuring needs LibTorch, which only sailor-node links (so that `sailor plan` and the
// coordinator start fast): this command checks its arguments and runs
// `sailor-node profile ...` in its place (train/profiler.hpp).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "share_dir.hpp"

namespace sailor::app {
namespace {

struct profile_args {
  std::string model;  ///< default: the shipped tiny.yaml (share_dir.hpp)
  std::string out = "profile.json";
  std::string micro_batches = "1,2,4,8";
  std::string tp = "1";
  int repeats = 7;
  int warmup = 2;
  int threads = 1;
  std::string gpu_type = "CPU";
  std::string device = "cpu";
  std::string statistic = "median";
  std::string node_binary;
};

int run_profile(const profile_args& a) {
  namespace fs = std::filesystem;
  if (auto err = check_shipped_default(a.model, "--model")) {
    std::fprintf(stderr, "sailor profile: error: %s\n", err->to_string().c_str());
    return 3;  // unavailable (exit_codes.hpp)
  }
  std::string node = a.node_binary;
  if (node.empty()) node = (fs::read_symlink("/proc/self/exe").parent_path() / "sailor-node").string();
  if (access(node.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "sailor profile: error: cannot run %s (build it, or give --node-binary)\n",
                 node.c_str());
    return 3;  // unavailable (exit_codes.hpp)
  }
  std::vector<std::string> args = {node,
                                   "profile",
                                   "--model",
                                   a.model,
                                   "--out",
                                   a.out,
                                   "--micro-batches",
                                   a.micro_batches,
                                   "--tp",
                                   a.tp,
                                   "--repeats",
                                   std::to_string(a.repeats),
                                   "--warmup",
                                   std::to_string(a.warmup),
                                   "--threads",
                                   std::to_string(a.threads),
                                   "--gpu-type",
                                   a.gpu_type,
                                   "--device",
                                   a.device,
                                   "--statistic",
                                   a.statistic};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(node.c_str(), argv.data());
  std::fprintf(stderr, "sailor profile: error: cannot run %s\n", node.c_str());
  return 3;  // unavailable (exit_codes.hpp)
}

}  // namespace

void add_profile(CLI::App& app, command_set& commands) {
  auto a = std::make_shared<profile_args>();
  a->model = shipped_file("configs/models/tiny.yaml");
  auto* sub = app.add_subcommand(
    "profile", "measure per-layer times of a model on this machine's devices and write a profile");
  sub->add_option("--model", a->model, "model YAML (configs/models/*.yaml)")->capture_default_str();
  sub->add_option("--out", a->out, "profile JSON to write (Sailor's profiles_tmp.json layout)")
    ->capture_default_str();
  sub->add_option("--micro-batches", a->micro_batches, "micro-batch sizes, comma separated")
    ->capture_default_str();
  sub->add_option("--tp", a->tp, "TP degrees, comma separated (TP ranks run as threads)")
    ->capture_default_str();
  sub->add_option("--repeats", a->repeats, "timed runs per measurement (median)")
    ->capture_default_str();
  sub->add_option("--warmup", a->warmup, "untimed runs first")->capture_default_str();
  sub->add_option("--threads", a->threads, "torch intra-op threads")->capture_default_str();
  sub->add_option("--gpu-type", a->gpu_type, "GPU type to file the times under (catalog name)")
    ->capture_default_str();
  sub->add_option("--device", a->device, "cpu or cuda:N")->capture_default_str();
  sub->add_option("--statistic", a->statistic,
                  "median of the repeats (the layer's own time) or mean (expected time under "
                  "this machine's current load)")
    ->check(CLI::IsMember({"median", "mean"}))
    ->capture_default_str();
  sub->add_option("--node-binary", a->node_binary, "sailor-node (default: next to sailor)");
  sub->callback([&commands, a] { commands.selected = [a] { return run_profile(*a); }; });
}

}  // namespace sailor::app
