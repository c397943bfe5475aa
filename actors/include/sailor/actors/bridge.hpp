#pragma once
/// The bridge: CAF actors in one process send to named actors in another.
///
/// Each process publishes some of its actors under names ("supervisor", "agent",
/// "zone:us-east1-a"). For an actor named N at a connected peer, `remote_actor` returns a
/// local proxy: anything sent to it is encoded (wire.hpp) and written to the peer's link at
/// once, on the sender's thread; the peer's bridge decodes it and delivers it to its actor
/// named N, with the sender replaced by a proxy of the original sender, so `current_sender()`
/// can be answered directly. When a peer's link closes or fails, every proxy of that peer
/// terminates with `remote_link_unreachable`: actors that `monitor` a proxy receive a
/// `down_msg`, exactly as for a local actor.
///
/// Frames that are not Sailor frames, frames of another protocol version and frames that do
/// not decode close the link; the peer is sent a `join_refused` with the reason when that is
/// possible, the reason is logged once (warn) and reported to the refusal observer.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "sailor/actors/link.hpp"  // also declares comm::transport
#include "sailor/actors/messages.hpp"
#include "sailor/config/error.hpp"

namespace sailor::actors {

using peer_id = std::uint64_t;

class bridge {
public:
  /// Links go over `transport` when given (comm's UCX or TCP backends, shaped or not; it must
  /// outlive the bridge), else over a comm TCP transport of the bridge's own, made when it
  /// first listens or connects (no name, no job token).
  explicit bridge(caf::actor_system& system, comm::transport* transport = nullptr);
  ~bridge();
  bridge(const bridge&) = delete;
  bridge& operator=(const bridge&) = delete;

  /// Makes `local` reachable from peers as `name` (and names `local` as a sender).
  void publish(const std::string& name, const caf::actor& local);

  /// Accepts peers on host:port (port 0 picks one). Returns the port bound.
  result<std::uint16_t> listen(const std::string& host, std::uint16_t port);

  /// Connects to a listening bridge.
  result<peer_id> connect(const std::string& host, std::uint16_t port, int timeout_ms = 5000);

  /// Adds an already connected, not yet started link (e.g. one end of local_link_pair()).
  peer_id adopt(std::shared_ptr<link> l);

  /// A proxy for the actor named `name` at `peer`. For a peer that is gone the proxy is
  /// already down (monitoring it yields a down_msg at once).
  caf::actor remote_actor(peer_id peer, const std::string& name);

  /// Called (on a link thread) for each peer refused at the door.
  void on_refused(std::function<void(const peer_refused&)> observer);

  /// Closes every link; proxies go down.
  void close();

  /// Number of peers whose link is open.
  std::size_t open_peers() const;

  struct core;

private:
  result<comm::transport*> transport_or_default();

  // Declared before core_ so that it outlives the links when the bridge is destroyed.
  std::unique_ptr<comm::transport> own_transport_;
  std::shared_ptr<core> core_;
};

}  // namespace sailor::actors
