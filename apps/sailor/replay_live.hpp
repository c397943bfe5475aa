#pragma once
// `sailor replay --trace T... --live`: a slice of a spot availability trace played on local
// nodes while the job trains (issue 18, item 2).
//
// Each column of the trace (one GPU type in one zone) is an emulated zone (local-a, local-b,
// ...) of min(count, --nodes-per-zone) sailor-node processes with one CPU device each, started
// by this process around a coordinator in it (local_cluster.hpp, as `sailor train` does). The
// trace runs --time-scale trace-seconds per real second: a fall stops the column's newest
// nodes, with notice (SIGTERM) or, for a seeded share --kill-fraction, without (SIGKILL); a
// rise starts new ones, which join and grow the job. When every node is gone the job waits for
// capacity and goes on when a node joins again. The --cluster's on-demand pools
// (`<type>/on-demand`, config/pools.hpp) are emulated zones of their own that the trace never
// touches (an on-demand anchor keeps the job training through a fall of every spot zone). The summary says what was trained, lost and
// waited for, the GPU-hours each column's nodes ran (in trace time), and their dollars at the
// catalog's spot and on-demand prices (planner/spot_live.hpp).
//
// `--policy restart_from_checkpoint` plays the baseline of Sailor and Varuna on the same
// slice: on every change every node is killed (SIGKILL: nothing handed over) and as many are
// started again as the trace now has, so the job restarts from the newest checkpoint on disk
// (the nodes share this machine's state folder). Its summary measures what such a restart costs
// on this runtime, where the simulated replay assumes it (--baseline-restart-s).
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sailor/planner/spot_replay.hpp"

namespace sailor::app {

struct live_replay_options {
  std::vector<std::string> traces;
  std::string cluster;  ///< prices and the GPU catalog of the trace (default: the built-in catalog)
  std::string model, job;  ///< default: the tiny model and job of configs/
  int from_tick = 0, to_tick = -1;
  int nodes_per_zone = 2;
  double time_scale = 300;  ///< trace seconds per real second
  double kill_fraction = 0;
  std::uint64_t seed = 1;
  /// ours (the runtime recovers from the survivors; a notice hands the state over) or
  /// restart_from_checkpoint (every node killed and started again on every change)
  planner::spot_policy policy = planner::spot_policy::ours;
  int iterations = 0;  ///< the job's iteration cap (0: 1000000, the slice's end stops it)
  std::string summary_json;
  std::string node_binary;
  std::string profile_cache;  ///< folder of the measured profiles (default: the work folder's)
  double join_timeout_s = 60;
  double stall_timeout_s = 60;
  bool verbose = false, keep_logs = false;
};

/// The live replay's own options (--live itself is the caller's).
void add_live_replay_options(CLI::App* sub, live_replay_options& o);

/// Runs the live replay: 0 done, 1 failed, 2 bad input (exit_codes.hpp).
int run_live_replay(const live_replay_options& opt);

}  // namespace sailor::app
