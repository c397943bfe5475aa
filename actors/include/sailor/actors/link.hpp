#pragma once
/// The transport the bridge runs over: framed byte links between two processes.
///
/// This is a small internal interface so that the bridge does not depend on one transport:
/// it is implemented over the comm module's transports (UCX, TCP, shaped; each frame one
/// control message) and, for in-process tests, by two ends joined in memory.
///
/// A link delivers whole frames, in order, to `on_frame` on the link's own thread, and calls
/// `on_closed` exactly once, with a reason, when the peer goes away, a read fails, bad bytes
/// arrive, or `close` is called. A closed link stays closed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::actors {

struct link_handlers {
  std::function<void(std::vector<char>&& frame)> on_frame;
  std::function<void(const std::string& reason)> on_closed;
};

/// One connected peer. Thread-safe.
class link {
public:
  virtual ~link() = default;
  /// Starts delivering frames to `handlers`. Call once, before anything arrives.
  virtual void start(link_handlers handlers) = 0;
  /// Sends one frame (queued in order; see `flush`). Returns false if the link is closed.
  virtual bool send(const std::vector<char>& frame) = 0;
  /// Waits, at most `limit`, until every frame sent so far left this process's hands (a
  /// process that exits right after closing its links would drop what is still queued: a
  /// coordinator's shutdown notices). Not from the transport's own thread.
  virtual void flush(std::chrono::milliseconds limit) { (void)limit; }
  /// Closes the link; `on_closed` runs with `reason` unless it already ran.
  virtual void close(const std::string& reason) = 0;
  /// The peer's address, for log lines.
  virtual const std::string& peer() const = 0;
  /// The name the peer announced in the comm transport's handshake, bound to its proof of
  /// the job token when the job has one (comm/auth.hpp); empty for links without a handshake
  /// (in-process pairs). The bridge takes messages about a node only
  /// from a link of that name.
  virtual std::string peer_name() const { return {}; }
};

/// Accepts links. Destroying it stops accepting (links already accepted live on).
class link_listener {
public:
  virtual ~link_listener() = default;
  /// The port actually bound (useful with port 0).
  virtual std::uint16_t port() const = 0;
};

using accept_handler = std::function<void(std::shared_ptr<link>)>;

/// Two connected links in this process, joined in memory, for tests.
std::pair<std::shared_ptr<link>, std::shared_ptr<link>> local_link_pair();

}  // namespace sailor::actors

namespace sailor::comm {
class transport;
}

namespace sailor::actors {

/// Listens through a comm transport (UCX, comm's TCP, or either behind the link shaper).
/// The transport's handshake already refuses peers of another protocol version and garbage
/// (logged by comm, and told to `on_refused` with the peer's address and the reason); frames
/// then travel as the transport's control messages.
result<std::unique_ptr<link_listener>> comm_listen(
  comm::transport& transport, const std::string& host, std::uint16_t port,
  accept_handler on_accept,
  std::function<void(const std::string& peer, const std::string& reason)> on_refused = {});
/// Connects through a comm transport; waits (bounded) until the handshake is accepted.
result<std::shared_ptr<link>> comm_connect(comm::transport& transport, const std::string& host,
                                           std::uint16_t port, int timeout_ms = 5000);

}  // namespace sailor::actors
