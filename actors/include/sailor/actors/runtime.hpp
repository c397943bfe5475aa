#pragma once
/// Putting the actors together: a coordinator (bridge + supervisor + scheduler) and a node
/// (bridge + node agent), in this process. `sailor coordinator`, `sailor-node`, the examples
/// and the tests all start them through here.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/node_agent.hpp"
#include "sailor/actors/planner_actor.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/train/checkpoint_keeper.hpp"

namespace sailor::actors {

struct coordinator_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: any free port (see coordinator::port)
  supervisor_options supervisor;  ///< its `scheduler` may be left empty when `plan` is set
  /// Wrapped in a planner_actor: the scheduler when none is given, else the built-in
  /// planner beside it (supervisor_options::builtin).
  planning_function plan;
  comm::transport* transport = nullptr;  ///< comm transport (UCX...); null: comm TCP, no token
  /// The scheduler runs in its own process and connects (remote_scheduler.hpp): the
  /// supervisor's scheduler is the gate to it, and `plan` the built-in planner beside it.
  bool remote_scheduler = false;
};

/// A running coordinator. Destroying it stops the supervisor and closes every link.
class coordinator {
public:
  static result<std::unique_ptr<coordinator>> start(caf::actor_system& system,
                                                    coordinator_options options);
  ~coordinator();

  std::uint16_t port() const { return port_; }
  const supervisor_actor& supervisor() const { return supervisor_; }
  const scheduler_actor& scheduler() const { return scheduler_; }
  /// The built-in planner (the scheduler itself when none was given).
  const scheduler_actor& builtin() const { return builtin_; }
  bridge& links() { return *bridge_; }

private:
  coordinator() = default;
  std::unique_ptr<bridge> bridge_;
  caf::actor store_;
  supervisor_actor supervisor_;
  scheduler_actor scheduler_;
  scheduler_actor builtin_;
  std::uint16_t port_ = 0;
};

/// A running node: its bridge to the coordinator and its agent.
class node {
public:
  /// Connects to the coordinator at host:port and starts the agent (which joins at once).
  /// `options.supervisor` and `options.resolve` are filled here.
  static result<std::unique_ptr<node>> start(caf::actor_system& system, const std::string& host,
                                             std::uint16_t port, node_agent_options options,
                                             comm::transport* transport = nullptr);
  ~node();

  const node_agent_actor& agent() const { return agent_; }
  /// How the agent ended (valid once it is down).
  const agent_outcome& outcome() const { return *outcome_; }
  bridge& links() { return *bridge_; }
  /// The coordinator's rendezvous store, where this node's ranks meet their peers.
  const std::shared_ptr<rendezvous_client>& rendezvous() const { return rendezvous_; }

private:
  node() = default;
  std::unique_ptr<bridge> bridge_;
  std::shared_ptr<rendezvous_client> rendezvous_;
  node_agent_actor agent_;
  std::shared_ptr<agent_outcome> outcome_;
};

/// Asks the coordinator at host:port for its status; bounded by `timeout`.
result<cluster_status> query_status(caf::actor_system& system, const std::string& host,
                                    std::uint16_t port,
                                    std::chrono::milliseconds timeout = std::chrono::seconds{5},
                                    comm::transport* transport = nullptr);

/// The transports a process can run the bridge over: "ucx" and "tcp" (the comm module's
/// backends). `name` and `zone` are told to peers in the comm handshake, and `token` (the job
/// token, comm/auth.hpp; empty: none) proven there. `tls`: certificate, key and CA for TLS
/// (tcp only; an error with ucx).
result<std::unique_ptr<comm::transport>> make_transport(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& zone,
                                                        const std::string& token = {},
                                                        const std::string& host = {},
                                                        const comm::transport_options::tls_files& tls = {});

/// The name the coordinator's checkpoint keeper proves the job token as: the nodes' shard
/// servers let it fetch every shard (train/shard_access.hpp).
inline constexpr const char* keeper_name = "coordinator-keeper";

/// The coordinator's checkpoint keeper (train/checkpoint_keeper.hpp) on a transport of its own
/// of `kind`, proving `token` as keeper_name, for supervisor_options::keeper.
result<std::shared_ptr<train::checkpoint_keeper>> start_checkpoint_keeper(
  const std::string& kind, const std::string& token, train::checkpoint_keeper_options options,
  const comm::transport_options::tls_files& tls = {});

/// A caf::actor_system_config with every Sailor message type registered.
class runtime_config : public caf::actor_system_config {
public:
  runtime_config();
};

}  // namespace sailor::actors
