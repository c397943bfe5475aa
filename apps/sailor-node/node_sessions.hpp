#pragma once
// sailor-node's sessions with its coordinator (node_sessions.cpp): joining with backoff,
// joining again when the connection drops (for --coordinator-grace) or the node was declared
// lost, and what each join offers (the state the node holds). main.cpp reads the command line.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "node_probes.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/link_table.hpp"
#include "sailor/comm/transport.hpp"
#ifdef SAILOR_WITH_TRAIN
#include "sailor/train/shard_service.hpp"
#endif

namespace sailor::node {

/// sailor-node's command line.
struct node_args {
  std::string join;
  std::string zone;
  std::string devices = "cpu:1";
  std::string gpu_type;
  std::string name;
  std::string transport = "tcp";
  std::string data_transport;  ///< empty: as --transport
  std::string token_file;
  comm::transport_options::tls_files tls;
  std::string advertise;  ///< empty: the address of the interface that reaches the coordinator
  std::string state_dir;  ///< empty: node_host.hpp's default (stable across runs)
  std::string log_dir;    ///< with log_dir_given: DIR/NAME.log, or "" for stderr only
  bool log_dir_given = false;  ///< else: STATE_DIR/node.log (the run before's as node.previous.log)
  bool emulate_gpu = false;  ///< CPU cores planned as --gpu-type (tests, demos)
  double join_timeout_s = 60;  ///< retry the join this long at the start (and when declared lost)
  double coordinator_grace_s = 120;  ///< after the coordinator's connection dropped
  double slowdown = 1;         ///< emulation: compute stretched this many times
  std::string slowdown_file;   ///< SIGUSR2 reads the slowdown from its first line
  std::string link_file;       ///< SIGUSR2 reads the emulated links changed from it
  double leave_in_s = 0;  ///< > 0: a preemption notice to itself this long after the start
  double grace_s = 10;    ///< after a notice: the longest it stays to hand over its state
  int threads = 0;        ///< compute threads per rank; 0: the cores over the node's ranks
  /// MiB of state peers hand over that the node holds at most (shard_access.hpp).
  std::int64_t max_held_state_mib = 4096;
  bool threads_given = false;  ///< --threads was on the command line (0 is then refused)
};

/// Each rank's data-plane transport: UCX or comm's TCP (--data-transport, else --transport).
comm::transport_maker data_transport_maker(const node_args& args, const std::string& advertise);

// A stop asked for by a signal: the agent of the session in progress is told (a preemption
// notice to the coordinator), and a join still being retried gives up.
class stop_watch {
public:
  void signal() {
    std::lock_guard lock{mu_};
    stopped_ = true;
    if (agent_)
      caf::anon_send(agent_, actors::preempt_atom::value);
    woken_.notify_all();
  }
  bool stopped() const {
    std::lock_guard lock{mu_};
    return stopped_;
  }
  void set_agent(actors::node_agent_actor agent) {
    std::lock_guard lock{mu_};
    agent_ = std::move(agent);
    if (stopped_ && agent_)
      caf::anon_send(agent_, actors::preempt_atom::value);
  }
  /// Waits up to `d`; false when stopped meanwhile.
  bool wait(std::chrono::milliseconds d) {
    std::unique_lock lock{mu_};
    return !woken_.wait_for(lock, d, [this] { return stopped_; });
  }

private:
  mutable std::mutex mu_;
  std::condition_variable woken_;
  bool stopped_ = false;
  actors::node_agent_actor agent_;
};

// What every session with a coordinator shares: the node's inventory and state, and the
// transport its shard server and bridge run on.
struct session_context {
  const node_args& args;
  comm::address coordinator;
  actors::node_agent_options options;
  std::string state_dir;
  std::string advertise;                 // where peers reach this node
  comm::transport* data = nullptr;       // checkpoint shards (and probes of peers)
  comm::transport* transport = nullptr;  // the bridge's
#ifdef SAILOR_WITH_TRAIN
  std::shared_ptr<train::memory_shards> memory;  // ranks' state when a plan ends (recovery)
  std::shared_ptr<train::shard_access> access;   // who may fetch from and hand over to it
#endif
  std::shared_ptr<std::atomic<double>> slowdown = std::make_shared<std::atomic<double>>(1.0);
  std::shared_ptr<comm::link_table> links = std::make_shared<comm::link_table>();  // --link-file
  std::shared_ptr<node_probes> probes = {};  // link probes the coordinator asks for
};

/// Sessions with the coordinator until the node is told to stop, is refused, or cannot reach
/// the coordinator in time; returns the process's exit code.
int run_sessions(caf::actor_system& system, session_context& ctx, stop_watch& stop);

}  // namespace sailor::node
