#pragma once
/// A scheduler in its own process: it connects to the coordinator like a node does (the same
/// transport, and the same job token proven in the transport's handshake, comm/auth.hpp),
/// under the reserved name "scheduler" (protocol::scheduler_peer_name).
///
///   scheduler process                              coordinator process
///   user's scheduler_actor                         job_supervisor
///     ^ typed messages                               ^ typed messages (scheduler_api.hpp)
///   remote_scheduler (host actor "scheduler") <--> scheduler gate ("scheduler_gate")
///                       protocol messages over the bridge (scheduler_messages.hpp)
///
/// The gate is the supervisor's scheduler: it forwards plan requests and events to the
/// connected scheduler and its plan replies and requests back; the host does the same for
/// the user's scheduler, which cannot tell it from an in-process one (its
/// scheduler_attached names the host as supervisor and as built-in planner: a candidate
/// plan request goes to the coordinator's built-in planner).
///
/// Gate states:
///
///   [none] --scheduler_hello from the scheduler's connection--> [attached] (reply accepted)
///   [attached] --hello from another--> refused: one scheduler at a time
///   [attached] --its connection closes (the process died)--> [none]: pending plan requests
///              fail at once, so the supervisor's built-in planner decides them (logged)
///   [none] --plan_request--> fails at once: the built-in planner decides; the job keeps
///              running on its last plan meanwhile and nothing is re-planned for the loss
///
/// Only the attached scheduler's connection is heard: the bridge refuses a message for the
/// gate from a connection of another name (a node's), and the gate drops messages from any
/// sender but the attached one.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

/// The coordinator's side: a scheduler_actor that stands for the scheduler connected through
/// `links` (publishes itself there as protocol::scheduler_gate_actor).
scheduler_actor spawn_scheduler_gate(caf::actor_system& system, bridge& links);

/// The scheduler's side: hosts `scheduler` for the coordinator at host:port.
class remote_scheduler {
public:
  /// Connects over `transport` (make_transport(kind, protocol::scheduler_peer_name, "",
  /// token); null: comm TCP without a name or token), says hello and waits, bounded by
  /// `timeout`, for the gate to accept it. Errors: invalid_input when refused (another
  /// scheduler is attached, the token is wrong), as a retry would be; another kind when no
  /// coordinator answers (not up yet) or its gate does not (it runs no --scheduler remote).
  static result<std::unique_ptr<remote_scheduler>> connect(
    caf::actor_system& system, const std::string& host, std::uint16_t port,
    scheduler_actor scheduler, comm::transport* transport = nullptr,
    std::chrono::milliseconds timeout = std::chrono::seconds{10});
  /// Closes the connection and ends the host and the scheduler it hosts.
  ~remote_scheduler();

  /// Blocks until the coordinator's connection ends or `limit` passes; true when it ended.
  bool wait_closed(std::chrono::milliseconds limit);
  /// The host actor (down once the coordinator's connection ended).
  const caf::actor& host() const { return host_; }

private:
  remote_scheduler() = default;
  std::unique_ptr<bridge> bridge_;
  caf::actor host_;
  scheduler_actor scheduler_;
};

}  // namespace sailor::actors
