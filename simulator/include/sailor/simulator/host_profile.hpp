#pragma once
/// What a prediction of our runtime on CPU devices is made from: the model's per-layer profile
/// measured on this host (`sailor-node profile`, as many processes at once as the plan has
/// ranks) and what the host gives the ranks (cores, CPU per message and per all-reduce, and how
/// a pass's CPU work changes with the count of ranks sharing the cores). The live coordinator
/// plans and predicts with it (apps/sailor/live_planning.hpp); the simulated replay of a live
/// slice is given the one the live run measured (bench/spot_live_slice.hpp).

#include <map>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::simulator {

/// The model's per-layer profile and what this host gives the ranks (`sailor-node profile
/// --host-figures`).
struct measured_profile {
  config::model_profile profile;
  double host_cores = 0;            ///< cores the ranks get together (0: unknown)
  double cpu_per_message_s = 0;     ///< CPU of one point-to-point message, every thread
  double cpu_per_collective_s = 0;  ///< CPU of one gradient all-reduce, every thread
  int ranks = 0;                    ///< processes that measured it at once (0: unknown)
  /// The host model across counts of ranks: per count of processes that measured the model
  /// at once on this host (those cached so far, this one's included), a pass's CPU work in
  /// that count's profile over this profile's (1 at `ranks`). Ranks sharing the cores share
  /// caches and memory bandwidth: each computes slower the more there are.
  std::map<int, double> cpu_work_by_ranks;
};

/// How our runtime runs on CPU devices (no CUDA context, sends overlap compute, full copies to
/// every receiving TP rank), with what the profile measured of this host when there is one.
sim_options cpu_sim_options(const measured_profile* profile);

/// A pass's CPU work in `p`: every layer's forward, backward and update of `type` at
/// micro-batch `mbs` and TP 1 (0: not timed there).
double pass_work(const config::model_profile& p, const std::string& type, int mbs);

/// The host model of `m` from the profiles other counts of processes measured on the same
/// host (`others`, each with its `ranks`; `m`'s own count skipped): `cpu_work_by_ranks` (1 at
/// `m.ranks`, each other count's pass work of `type` at `mbs` over `m`'s) and the most cores
/// the processes of any count got together (one process alone cannot show more than one).
void add_host_model(measured_profile& m, const std::vector<measured_profile>& others, const std::string& type,
                    int mbs);

/// The profile at `path` (profile JSON) with its host figures from `path`.host.json
/// (`host_cores`, `cpu_per_message_s`, `cpu_per_collective_s`, `ranks`: 0 when it does not
/// say); errors name the file.
result<measured_profile> load_measured_profile(const std::string& path);

}  // namespace sailor::simulator
