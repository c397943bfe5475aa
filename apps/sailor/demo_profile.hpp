#pragma once
// What `sailor demo` predicts from: the tiny model's per-layer profile measured on this
// machine by `sailor-node profile` (as many processes at once as the plan has ranks), and what
// this host gives the ranks (cores, CPU per message and per all-reduce).

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/simulator/host_profile.hpp"

namespace sailor::app {

/// What the demo's prediction is made from: the model's per-layer profile and what this host
/// gives the ranks (simulator/host_profile.hpp).
using simulator::measured_profile;

/// Where the profile comes from.
struct profile_request {
  std::string profile;  ///< cache file: read if it covers the plan, else written ("" : none)
  std::string model;    ///< model YAML the profiling processes load
  /// When `profile` is empty: a folder of profiles cached by device type, model, build and
  /// the number of processes measuring at once (profile_cache_file).
  std::string cache_dir;
  std::string device_type = "CPU";
  /// Only a cached profile (an error when none covers the plan): a re-plan during recovery
  /// does not stop to measure one.
  bool cached_only = false;
  /// Compute threads of each rank (what the nodes give their ranks' matrix products: OpenBLAS
  /// threads, LibTorch's own operators on one). Above 1 the passes are timed by the wall
  /// clock (a thread's CPU clock misses its helper threads' work) with the processes measuring
  /// together as the ranks train together.
  int threads = 1;
  /// Micro-batch sizes to measure besides the plan's (the search chooses among them); sizes
  /// the plan's global batch does not need are measured all the same.
  std::vector<int> micro_batches = {};
};

/// The cache file of a device type's profile of a model under a build:
/// `dir/profile-<type>-<hash of the model file>-<hash of the node binary's size and time>.json`.
/// "" when `dir` is empty.
std::string profile_cache_file(const std::string& dir, const std::string& device_type,
                               const std::string& model_file, const std::string& node_binary);

/// The model's profile for plan `p` on this machine: the cached file when it covers the plan,
/// else measured by `node_binary profile` (bounded) in `work` and written to the cache. With a
/// cache folder (`cache_dir`), a plan of several ranks is also measured by one process alone
/// (unless `cached_only`), and the result carries the host model (cpu_work_by_ranks) of every
/// count cached, and the most cores any count's processes got together.
result<measured_profile> obtain_profile(const profile_request& args, const std::string& node_binary,
                                        const std::filesystem::path& work, const config::plan& p);

}  // namespace sailor::app
