#pragma once
/// The scheduler protocol's messages (actors/scheduler_api.hpp says what each means), as wire
/// messages: a scheduler in its own process (actors/remote_scheduler.hpp) gets and sends
/// these over the bridge, in the envelope of every other message.
///
///   coordinator's gate --plan_request, availability_event, iteration_telemetry,
///                        plan_applied, plan_refused, replan_finished--> remote scheduler
///   remote scheduler --scheduler_hello--> gate --scheduler_reply{0}--> (attached or refused)
///   remote scheduler --plan_reply (answers plan_request by request_id)--> gate
///   remote scheduler --scheduler_request{id}--> gate --scheduler_reply{id}--> remote
///   remote scheduler --plan_request (a candidate from the built-in planner)--> gate
///                    <--plan_reply (same request_id)-- gate
///
/// In one process the same structs are the typed scheduler_actor's messages, sent as they are.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sailor/config/plan.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::protocol {

/// What happened to a node's availability. A preemption notice is followed by `lost`.
enum class availability_kind : std::int32_t {
  joined = 0,
  preemption_notice = 1,
  lost = 2,
};
/// "joined", "preemption_notice" or "lost".
const char* to_string(availability_kind k);

/// A node joined, got a preemption notice, or was lost. `reason` says why a node was lost
/// (missed heartbeats, endpoint closed, preempted, evicted, drained).
struct availability_event {
  availability_kind kind = availability_kind::joined;
  node_inventory node;
  std::string reason;
  /// preemption_notice: milliseconds until the node goes (0: at once, as spot notices that
  /// come without a deadline are treated).
  std::int64_t deadline_ms = 0;
  bool operator==(const availability_event&) const = default;
};

/// What a placement rule does: pin a stage on a node, forbid a node (one stage or every
/// stage), or clear the rules of a node.
enum class placement_kind : std::int32_t {
  pin = 0,
  forbid = 1,
  clear = 2,
};
/// "pin", "forbid" or "clear".
const char* to_string(placement_kind k);

/// A placement rule a scheduler set: kept by the supervisor, honoured by the supervisor's
/// placement of replicas and checked on every plan.
struct placement_rule {
  placement_kind kind = placement_kind::pin;
  std::string node;
  int stage = -1;  ///< -1: every stage (forbid, clear); pin needs a stage
  bool operator==(const placement_rule&) const = default;
};

/// Asks for a plan over `nodes` (every node that is up and not drained or forbidden now).
struct plan_request {
  std::int64_t request_id = 0;
  std::string reason;  ///< why a plan is needed now, for logs
  std::vector<node_inventory> nodes;
  bool has_current = false;
  config::plan current;  ///< the plan running now, when has_current (for re-planning)
  /// The placement rules in force (a plan that breaks one is refused).
  std::vector<placement_rule> rules;
  /// Objective and constraints the schedulers set (objective_change), as key=value pairs.
  std::vector<std::string> objective;
  /// The model's layer count, embedding and head included (0: unknown): a plan's stages must
  /// cover layers 0 .. model_layers - 1, each in exactly one stage.
  int model_layers = 0;
};

/// The scheduler's answer: a plan, or the reason there is none.
struct plan_reply {
  std::int64_t request_id = 0;
  bool ok = false;
  config::plan plan;
  std::string error;

  static plan_reply success(std::int64_t id, config::plan p) {
    return plan_reply{id, true, std::move(p), {}};
  }
  static plan_reply failure(std::int64_t id, std::string why) {
    return plan_reply{id, false, {}, std::move(why)};
  }
};

/// One rank's iteration, as the supervisor heard it, with what the plan predicted.
struct iteration_telemetry {
  std::int64_t plan_version = 0;
  std::int64_t iteration = 0;
  std::string node;
  int stage = 0;
  int replica = 0;
  double measured_s = 0;  ///< the rank's whole iteration
  double compute_s = 0;
  double wait_s = 0;        ///< send and receive waits
  double all_reduce_s = 0;
  double predicted_s = 0;  ///< the iteration time the plan was chosen with (0: none)
  double loss = 0;
  bool operator==(const iteration_telemetry&) const = default;
};

/// A plan was handed to the nodes. `by`: "scheduler" or "built-in planner" (the fallback).
struct plan_applied {
  std::int64_t plan_version = 0;
  config::plan plan;
  std::string by;
};

/// The scheduler's plan of request `request_id` was refused before any node acted on it.
struct plan_refused {
  std::int64_t request_id = 0;
  std::string reason;
  bool operator==(const plan_refused&) const = default;
};

/// Every rank of plan `plan_version` started it: `recovery_s` from the moment the re-plan
/// began (`reason`) to then.
struct replan_finished {
  std::int64_t plan_version = 0;
  std::string reason;
  double recovery_s = 0;
  bool operator==(const replan_finished&) const = default;
};

// -- only on the wire: a scheduler in its own process ---------------------------------------

/// A remote scheduler's first message, to the coordinator's actor "scheduler_gate"; answered
/// with scheduler_reply{request_id 0}. Its connection must have announced itself as
/// `scheduler_peer_name` in the transport's handshake (and proven the job token there).
struct scheduler_hello {
  std::string name;  ///< for logs
  bool operator==(const scheduler_hello&) const = default;
};

/// The name a remote scheduler's connection announces in the transport handshake; a node may
/// not join under it, and only a connection of this name may talk to the scheduler gate.
inline constexpr const char* scheduler_peer_name = "scheduler";
/// The actor names the scheduler's messages travel between: the coordinator's gate, and the
/// actor hosting the scheduler in its own process. No other actor gets them from the wire.
inline constexpr const char* scheduler_gate_actor = "scheduler_gate";
inline constexpr const char* scheduler_host_actor = "scheduler";

/// What a remote scheduler asks, and the fields of scheduler_request each uses: replan_now
/// (reason), drain_node (node, deadline_ms), evict_node (node, reason), pin, forbid or clear
/// (a placement_rule: node, stage), objective_change (key, value).
enum class scheduler_command : std::int32_t {
  replan_now = 0,
  drain_node = 1,
  evict_node = 2,
  pin = 3,
  forbid = 4,
  clear = 5,
  objective_change = 6,
};
/// Its name as above ("replan_now", ...).
const char* to_string(scheduler_command c);

/// The request that carries a placement rule of kind `k`; nothing for a value this build does
/// not know.
std::optional<scheduler_command> command_for(placement_kind k);
/// The placement rule a pin, forbid or clear request carries; nothing for another command.
std::optional<placement_kind> placement_of(scheduler_command c);

/// A remote scheduler's request to the supervisor (scheduler_api.hpp's replan_now,
/// drain_node, evict_node, placement_rule and objective_change in one struct), answered
/// with a scheduler_reply of the same request_id.
struct scheduler_request {
  std::int64_t request_id = 0;
  scheduler_command kind = scheduler_command::replan_now;
  std::string node;
  std::string reason;
  std::int64_t deadline_ms = 0;
  int stage = -1;
  std::string key;
  std::string value;
  bool operator==(const scheduler_request&) const = default;
};

/// The supervisor's scheduler_answer to request `request_id` (0: to the hello).
struct scheduler_reply {
  std::int64_t request_id = 0;
  bool accepted = false;
  std::string reason;
  bool operator==(const scheduler_reply&) const = default;
};

}  // namespace sailor::protocol
