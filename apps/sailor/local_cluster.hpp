#pragma once
// `sailor train` and `sailor demo`: a job run on this machine, the coordinator in this process
// and N sailor-node processes started by it (what `torchrun --standalone` is to PyTorch), in
// Z emulated zones. `sailor demo` is `sailor train` on built-in defaults.
//
//   local_cluster      the processes: a work folder, the coordinator (supervisor, planner,
//                      rendezvous store, dashboard), the node children, Ctrl-C; every exit
//                      goes through cleanup(), which stops the children within a bound
//   local_planning     the plan callback: the planner's plan (or a fixed one), refused when it
//                      does not fit a device, predicted by the simulator on a measured profile
//   local_progress     what the supervisor's callbacks tell the main thread, the progress lines,
//                      the summary and its JSON
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "child_process.hpp"
#include "commands.hpp"
#include "dashboard.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/config/cluster.hpp"

namespace sailor::app {

/// What `sailor train` and `sailor demo` are asked.
struct local_run_args {
  std::string command = "train";  ///< the subcommand, for messages ("sailor train: ...")
  int nodes = 4;
  int zones = 0;  ///< 0: min(nodes, 2)
  int regions = 1;  ///< regions the zones are spread over (local_zones_cluster)
  std::string region_link = "50,12.5";  ///< between zones of different regions: LATENCY_MS,MBPS
  int iterations = 0;  ///< 0: the job file's
  std::string model, job;
  /// The cluster YAML whose catalog and first link are used: the shipped local-2-zones.yaml
  /// (set where the command line is made, share_dir.hpp; "" when no share dir was found).
  std::string cluster;
  std::string data;     ///< replaces the job's data path ("": the job's)
  std::string init_from;  ///< replaces the job's init_from ("": the job's)
  std::string plan;     ///< a fixed plan instead of the planner's
  std::string profile;  ///< cached profile: read if it exists (and covers the plan), else written
  std::string summary_json;
  std::string node_binary;
  double join_timeout_s = 30;
  double stall_timeout_s = 60;
  bool verbose = false;
  bool keep_logs = false;
  int preempt_at = 0;        ///< kill one node (SIGKILL) after this many iterations; 0: never
  std::string preempt_mode = "kill";  ///< kill (SIGKILL) or notice (SIGTERM: a grace period)
  bool preempt_stage = false;  ///< preempt every replica of the newest node's stage
  int checkpoint_every = 1;  ///< 0: no checkpoints (a re-plan resumes from the
                             ///< ranks' memory, or afresh)
  dashboard_args dashboard;
  double dashboard_hold_s = 0;  ///< keep serving the dashboard this long after training
  std::string metrics_jsonl;    ///< one line of figures per iteration appended here ("": none)
  /// `sailor demo` on its own job: train on the quotes of Debian's fortunes-min package,
  /// joined into one corpus in the work folder (demo_corpus.hpp), in place of the job's data.
  bool fortunes_corpus = false;
  std::string sample_prompt = "The ";  ///< text jobs: the sample printed at the end starts so
  int sample_tokens = 200;             ///< characters of that sample (0: none)
  std::string planner = "even";  ///< "search" (the planner on the live profile) or "even"; `sailor train` and `sailor demo` default to search
  /// Folder of profiles cached by device type, model and build (when --profile is not given).
  std::string profile_cache;
  int straggler_at = 0;             ///< slow one node after this many iterations (0: never)
  double straggler_slowdown = 3;    ///< its compute stretched this many times
  /// Re-plan when telemetry shows a straggler and a plan without it is clearly faster
  /// (implied by straggler_at).
  bool replan_on_drift = false;
  /// Change one emulated link after this many iterations (0: never), to `link_change`
  /// ("ZONE_A:ZONE_B=LATENCY_MS,MBPS", comm/link_table.hpp), in every node.
  int link_change_at = 0;
  std::string link_change;
  /// The run's folder (run_folder.hpp): "" for `sailor train` makes one under
  /// ./sailor-runs/, for `sailor demo` none (a temporary folder, removed after a success).
  std::string out;
  bool default_out = false;  ///< `sailor train`: a run folder even without --out
  std::string resume;        ///< --resume DIR: the run in DIR goes on
  /// The options given on the command line (--resume takes the others from the run).
  std::vector<std::string> given;
};

/// The options both subcommands take (defaults as `args` holds them).
void add_local_run_options(CLI::App* sub, local_run_args& args);

/// Runs the job: 0 done, 1 failed, 2 bad input (exit_codes.hpp).
int run_local_training(const local_run_args& args);

/// The processes of a local run. Not copyable; destroying it cleans up as cleanup(1) does.
class local_cluster {
public:
  explicit local_cluster(std::string command);
  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  /// Makes the work folder (the coordinator's train folder and the nodes' state folder).
  status make_work_dir();
  /// Works in `dir` (made if missing) instead, which is kept whatever happens: a run's
  /// state folder (run_folder.hpp).
  status use_work_dir(const std::filesystem::path& dir);
  const std::filesystem::path& work() const { return work_; }
  /// Removes the work folder (bad input: nothing ran, nothing to keep).
  void remove_work_dir();
  /// Takes Ctrl-C and SIGTERM (a handler): the main loop polls interrupted() instead.
  void take_signals();
  bool interrupted();
  /// Waits up to `seconds` (less on Ctrl-C / SIGTERM).
  void hold(double seconds);

  caf::actor_system& system() { return *system_; }
  /// Before start(): each node gets a state folder of its own (work/<name>), as on machines
  /// that share nothing, and the coordinator keeps a copy of every checkpoint (work/kept,
  /// train/checkpoint_keeper.hpp), so that a job whose every node is gone resumes from it.
  void nodes_share_nothing() { share_nothing_ = true; }
  /// Starts the coordinator on a free loopback port over comm's TCP transport with a fresh job
  /// token (written to the work folder for the nodes), and the dashboard on its board.
  status start(actors::coordinator_options options, const dashboard_args& dashboard,
               const config::cluster& cluster, const config::model_shape& model);
  std::uint16_t port() const;
  const actors::supervisor_actor& supervisor() const;
  const dashboard* web() const { return web_.get(); }
  /// The supervisor's state (bounded wait; empty when it does not answer).
  std::optional<actors::cluster_status> query();

  /// Starts node k of `nodes` (one CPU device, zone k % zones) with `node_binary`, each
  /// with local_threads_per_node(nodes) compute threads (also the nodes started later).
  status spawn_nodes(const std::string& node_binary, int nodes, int zones);
  /// Starts one node `name` (one CPU device) in `zone`; it is the newest of children().
  status spawn_node(const std::string& node_binary, const std::string& name,
                    const std::string& zone);
  /// Waits until `nodes` joined (bounded); an error names a node that exited, or the count.
  status wait_for_joins(int nodes, double timeout_s);
  std::vector<child>& children() { return children_; }
  int live_children() const;
  /// "" or the first child that exited since the last call, with its log's tail.
  std::string child_died();

  /// Stops the coordinator (the nodes are told to shut down) and gives the children a bounded
  /// time to leave (a node flushes its checkpoints first); the dashboard goes on serving.
  void stop_processes();
  /// stop_processes(), stops the dashboard, removes the work folder when `code` is 0 and logs
  /// are not kept; returns `code`.
  int cleanup(int code, bool keep_logs);

private:
  std::string command_;
  std::filesystem::path work_;
  bool signals_taken_ = false;
  bool work_kept_ = false;  // use_work_dir(): never removed
  std::unique_ptr<actors::runtime_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<comm::transport> transport_;  // the coordinator's; outlives it
  bool share_nothing_ = false;
  std::filesystem::path token_file_;            // the job token, for the nodes
  std::unique_ptr<actors::coordinator> coordinator_;
  std::unique_ptr<dashboard> web_;
  std::vector<child> children_;
  int threads_per_node_ = 0;  // --threads of every node (spawn_nodes: local_threads_per_node)
  bool cleaned_ = false;
};

/// The compute threads each of `nodes` one-device nodes on this machine gets: its cores
/// shared among them, at least 1 each (what `sailor train` gives its nodes and profiles with).
int local_threads_per_node(int nodes);

/// Zone names of local runs: local-a, local-b, ...
std::string local_zone_name(int z);

/// The base cluster's catalog and first link, with `zones` zones holding the `nodes` nodes'
/// CPU devices round-robin; a CPU device's memory is this machine's share per node when that
/// is more than the catalog's. With `regions` > 1 the zones are spread over regions local-1,
/// local-2, ... in blocks (zone z in region z * regions / zones + 1), and zones of different
/// regions are joined by `cross_region` instead of the first link.
config::cluster local_zones_cluster(const config::cluster& base, int nodes, int zones, int regions = 1,
                                    const config::zone_link* cross_region = nullptr);

}  // namespace sailor::app
