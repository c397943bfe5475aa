#pragma once
/// The rendezvous store: where the ranks of a plan meet, served by the coordinator.
///
/// Gloo (and NCCL, for its unique ids) needs a key-value store that every rank of a plan can
/// reach. Nodes share nothing with each other but the network, so the coordinator serves the
/// store over the connection each node already has:
///
///   rank thread --get/set--> rendezvous_client --store_request--> bridge --> "store" actor
///   rank thread <--value---- rendezvous_client <--store_reply---- bridge <--      (coordinator)
///
/// Keys live in a scope per plan version; the server keeps the newest `keep_versions` scopes
/// and drops older ones (a get waiting in a dropped scope is answered "not found"). A get
/// waits at the server until the key is set or its deadline passes, and at the client for
/// the same deadline plus a margin, so no wait is unbounded even when the coordinator is gone.
///
/// Server state per get:   waiting --set of the key--> answered (found)
///                            |--deadline / scope dropped--> answered (not found)
///
/// Bounds: keys of at most max_key_bytes, values of at most max_value_bytes, at most
/// max_keys_per_scope keys and max_waiters pending gets; a request beyond them is answered
/// with an error and changes nothing.
///
/// Who may use a scope (with `require_scope`, as the coordinator runs it): the supervisor
/// opens the scope of each plan version it assigns (store_scope) with the nodes that have
/// ranks in it. A request names its node (the bridge refuses one that names another node than
/// the connection's authenticated one); the server answers a node only in a scope it is a
/// member of, so a node can neither read nor write the rendezvous of a plan it has no rank
/// in, nor make scopes of plan versions that do not exist (which would push the real ones
/// out). Within a scope a key belongs to the node that set it first: another member cannot
/// overwrite it. What is not enforced: which keys of the scope a member sets (Gloo's keys
/// name communicator ranks, which the store does not map to nodes), so a member can still
/// set keys meant for another member's ranks before that member does.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>

#include "sailor/actors/inspect.hpp"
#include "sailor/comm/collective.hpp"
#include "sailor/protocol/limits.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::protocol {

SAILOR_INSPECT(store_request, x.request_id, x.plan_version, x.key, x.set, x.value, x.timeout_ms,
               x.node)
SAILOR_INSPECT(store_reply, x.request_id, x.found, x.value, x.error)

}  // namespace sailor::protocol

namespace sailor::actors {

using protocol::store_reply;
using protocol::store_request;

/// From the supervisor to the store: the nodes whose ranks meet in plan version
/// `plan_version`'s scope (in-process only, never on the wire).
struct store_scope {
  std::int64_t plan_version = 0;
  std::vector<std::string> nodes;
};

SAILOR_INSPECT(store_scope, x.plan_version, x.nodes)

struct rendezvous_limits {
  /// Scopes exist only once the supervisor opened them (store_scope), and only their nodes
  /// are answered. False: any request opens its scope (tests of the store alone).
  bool require_scope = false;
  int keep_versions = 4;
  /// The protocol's bounds, which a store message's size ceiling follows from.
  std::size_t max_key_bytes = protocol::wire_bounds::store_key_bytes;
  std::size_t max_value_bytes = protocol::wire_bounds::store_value_bytes;
  std::size_t max_keys_per_scope = 65536;
  std::size_t max_waiters = 65536;
};

/// Spawns the coordinator's store actor (publish it as "store").
caf::actor spawn_rendezvous_server(caf::actor_system& system, rendezvous_limits limits = {});

/// A node's handle on the coordinator's store. Thread-safe; rank threads share it.
class rendezvous_client : public std::enable_shared_from_this<rendezvous_client> {
public:
  /// `server`: the coordinator's "store" actor (a bridge proxy). `publish` makes the client's
  /// reply actor reachable from the coordinator under the name `reply_name`.
  /// `node`: this node's name, put in every request (checked against the connection).
  static std::shared_ptr<rendezvous_client> start(
      caf::actor_system& system, caf::actor server,
      const std::function<void(const std::string&, const caf::actor&)>& publish,
      std::string node = {});
  ~rendezvous_client();
  rendezvous_client(const rendezvous_client&) = delete;
  rendezvous_client& operator=(const rendezvous_client&) = delete;

  /// The name the reply actor is published under.
  static constexpr const char* reply_name = "store-client";

  /// The store as the ranks of plan version `plan_version` see it.
  std::shared_ptr<comm::rendezvous_store> scope(std::int64_t plan_version);

  status set(std::int64_t plan_version, const std::string& key, const std::vector<char>& value);
  result<std::vector<char>> get(std::int64_t plan_version, const std::string& key,
                                std::chrono::milliseconds timeout);

  /// Called by the reply actor.
  void deliver(store_reply reply);

  /// Stops the reply actor (the actor system waits for it at exit); later gets fail at once.
  /// Idempotent; the node calls it when it stops, whoever still holds the client.
  void close();

  struct impl;

private:
  rendezvous_client() = default;
  std::unique_ptr<impl> impl_;
};

}  // namespace sailor::actors
