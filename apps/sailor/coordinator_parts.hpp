#pragma once
// The parts of `sailor coordinator` (coordinator.cpp runs them in order): the command line's
// values, the config files they name, the planner they choose (coordinator_planner.cpp) and
// the training callbacks of --train-dir (coordinator_training.cpp). Each part that can refuse
// its input prints why, naming the option or file, and returns the exit code; 0 goes on.
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "dashboard.hpp"
#include "run_summary.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"

namespace sailor::actors {
class job_journal;
}

namespace sailor::app {

class coordinator_drift;
class zone_link_probes;

struct coordinator_args {
  std::string listen = "127.0.0.1:7100";
  std::string cluster, model, job;
  int quorum = 0;
  double settle_s = 5;
  int heartbeat_ms = 500;
  int heartbeat_timeout_ms = 2000;
  std::string transport = "tcp";
  std::string token_file;
  comm::transport_options::tls_files tls;
  std::string planner = "search";
  std::string scheduler = "builtin";  ///< builtin (--planner) or remote (its own process)
  std::string sailor_data;
  std::string profile, profile_cache;  ///< --planner search: a profile file, the cache folder
  std::string train_dir;     ///< empty: control plane only
  int iterations = 0;        ///< 0: the job's
  int checkpoint_every = 1;
  double peer_timeout_s = 60;
  double startup_deadline_s = 0;  ///< 0: twice --peer-timeout-s, at least 60 s
  bool exit_when_done = false;
  bool keep_checkpoints = false;  ///< a copy of every checkpoint under --train-dir/kept
  bool emulate_links = false;
  bool probe_links = false;     ///< --planner search: the nodes probe the real zone links
  double probe_timeout_s = 5;   ///< bound on each wait of a probe between nodes
  bool replan_on_drift = true;  ///< --planner search with --train-dir (coordinator_drift.hpp)
  std::string summary_json;  ///< empty: none
  std::string metrics_jsonl;  ///< one line of figures per iteration appended here (empty: none)
  dashboard_args dashboard;
};

/// The config files and the listening address, loaded and checked.
struct coordinator_inputs {
  comm::address listen;
  config::cluster cluster;
  config::model_shape model;
  config::job job;
  /// The drift loop (coordinator_drift.hpp): --planner search arms it, training feeds it.
  std::shared_ptr<coordinator_drift> drift;
  /// --emulate-links / --probe-links with --planner search: the zone links the nodes probe
  /// (link_probes.hpp); null: the configured links.
  std::shared_ptr<zone_link_probes> probes;
};

/// What the supervisor's training callbacks write and main reads at exit.
struct coordinator_outcome {
  std::atomic<int> state{0};  ///< 0 running, 1 finished, 2 failed
  run_summary summary;
  /// --train-dir/journal (job_journal.hpp), written by the supervisor's callbacks.
  std::shared_ptr<actors::job_journal> journal;
};

/// Sets `options.plan` from --planner (even, search or sailor).
int choose_planner(const coordinator_args& args, const coordinator_inputs& in,
                   actors::coordinator_options& options);

/// With --train-dir: the training job and the callbacks that print, summarise and journal it
/// (a journal left by an earlier coordinator of the job is continued: `token` must be its
/// job token); without, the control-plane note. `outcome` must outlive the coordinator.
int setup_training(const coordinator_args& args, const coordinator_inputs& in,
                   const std::string& token, actors::supervisor_options& supervisor,
                   coordinator_outcome& outcome);

/// With --keep-checkpoints: the checkpoint keeper (train/checkpoint_keeper.hpp) on a
/// transport of its own (the job token's), handed to the supervisor.
int start_keeper(const coordinator_args& args, const coordinator_inputs& in,
                 const std::string& token, actors::supervisor_options& supervisor);

}  // namespace sailor::app
