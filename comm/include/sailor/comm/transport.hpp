#pragma once
/// The process-to-process transport: listeners, connections, control messages and tensor
/// payloads, with errors as values. Backends: UCX (ucx.hpp), plain TCP sockets (tcp.hpp), and
/// the link shaper (shaping.hpp), a decorator that makes one machine stand for many zones.
///
/// How a user (the actor bridge) uses it
/// -------------------------------------
/// 1. `main()` builds one transport (`make_ucx_transport(opts)`) and passes it down. The
///    transport owns one progress thread; every callback below runs on that thread, one at a
///    time, so callbacks of one transport never race each other. Keep them short (hand work to
///    an actor); they may call send_*(), close(), connect() and listen() re-entrantly.
/// 2. Server: `listen(address, on_accept)`. For each peer that completes the handshake
///    (matching protocol version, and the job token proven when one is set: auth.hpp),
///    `on_accept(conn)` is called with an open connection and returns the handlers for it; no
///    message of that connection is delivered before on_accept returns. Peers with another
///    protocol version, no or another token, names that are not printable UTF-8, or garbage
///    bytes are refused with a logged reason, told to the listener's `on_refused` (peer
///    address and reason); the listener keeps serving others. Before its handshake a peer can
///    make this side hold only a handshake message (4 KiB), for `handshake_timeout_s`, and at
///    most `max_unauthenticated` peers wait at once; after it, every message is checked against
///    the limit of its kind (`max_control_bytes`, `max_tensor_bytes`) before anything is
///    allocated for it, and one over it closes that connection. A handler that throws closes
///    its connection (logged); no exception reaches the progress thread.
/// 3. Client: `connect(address, handlers)` returns a connection in state `connecting` at once
///    (or an error for a malformed address). Sends may be issued right away: they are queued
///    and go out in order. `on_open` fires when the server accepted the handshake;
///    `on_error` fires instead if it refused, timed out or could not be reached.
/// 4. `send_control(bytes, done)` carries an encoded control message (messages.hpp encodes
///    the envelope). `send_tensor(desc, payload, done)` carries raw bytes described by `desc`;
///    the payload memory must stay valid and unchanged until `done` runs. Large payloads go
///    by rendezvous (UCX reads them straight from the caller's memory). `done` fires exactly
///    once: with no error once the bytes left this process's hands, or with the error.
/// 5. Receiving: `on_control(bytes)` and `on_tensor(desc, payload)`, delivered in the order the
///    peer sent them (controls and tensors share one order). For tensors, `allocate(desc)`
///    (optional) chooses where the bytes land, e.g. in a tensor's storage.
/// 6. Failure: a peer that dies, an endpoint error or a refused handshake calls `on_error`
///    exactly once; the connection is then `failed` forever: later sends complete at once with
///    that error and nothing more is received. Every send still pending gets its `done` with
///    the error. `close()` is local and quiet: sends issued before it are flushed (their
///    `done` reports the outcome), later sends complete with errc::closed, nothing more is
///    delivered and on_error is not called. The peer sees errc::disconnected.
/// 7. Destroying the transport stops its progress thread; every send still pending
///    completes with errc::closed (during the destruction), and connections still held by
///    users complete later sends at once with errc::closed, on the calling thread.
///    Destroying it from one of its own callbacks is a programming error (it aborts with a
///    message). Handlers may run until their connection is closed or failed, or the
///    transport is destroyed: keep what they reference alive until then (destroy the
///    transport first, or capture weak pointers).
///
/// State of a connection
/// ---------------------
///
///     connect() --> connecting --handshake accepted--> open --close()--> closed
///                       |                               |
///                       +--refused/timeout/error--+     +--peer died/endpoint error--+
///                                                 v                                  v
///                                               failed <-----------------------------+
///
///   Accepted connections start in `open`. `closed` and `failed` are final.
///
/// Thread safety: transport, listener and connection methods may be called from any thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sailor/comm/error.hpp"
#include "sailor/comm/non_copyable.hpp"
#include "sailor/comm/tensor.hpp"
#include "sailor/config/error.hpp"

namespace sailor::comm {

/// Version of the wire protocol (handshake, framing and messages.capnp). A peer with another
/// version is refused. 2: the envelope names its destination actor; accept, stage, status and
/// training messages carry every field of the runtime's messages. 3: the rendezvous store
/// (store_request, store_reply) and the node's advertised address.
inline constexpr std::uint32_t protocol_version = 3;

/// Where a listener listens or a connection goes.
struct address {
  std::string host = "127.0.0.1";  ///< IPv4 literal or a host name
  std::uint16_t port = 0;          ///< 0 for listen(): pick a free port

  /// `host:port`.
  std::string to_string() const;
  /// Parses `host:port` (an IPv6 literal in brackets: `[::1]:port`); an error names what was
  /// wrong. The one parser of addresses: command lines, plans and the store all use it.
  static result<address> parse(std::string_view text);
  bool operator==(const address&) const = default;
};

enum class connection_state { connecting, open, closed, failed };
const char* to_string(connection_state s);

/// Who is at the other end, as told in its handshake.
struct peer_info {
  std::string name;  ///< the peer's transport_options::local_name
  std::string zone;  ///< the peer's transport_options::local_zone (may be empty)
  address remote;    ///< its address as seen from here (best effort)
  /// The peer proved the job token in the handshake (comm/auth.hpp): `name` is then the
  /// name it authenticated as (bound into its proof). False when neither side has a token.
  bool authenticated = false;
};

/// Called exactly once per send with the outcome.
using completion = std::function<void(const op_status&)>;

/// Callbacks of one connection. All run on the transport's progress thread. Any may be empty.
struct connection_handlers {
  /// Client side: the server accepted the handshake; peer() is now known.
  std::function<void()> on_open;
  /// A control message (the bytes of an encoded envelope).
  std::function<void(std::vector<std::byte> bytes)> on_control;
  /// A tensor payload and its descriptor.
  std::function<void(tensor_descriptor desc, payload_buffer payload)> on_tensor;
  /// The connection failed; called at most once, never after close().
  std::function<void(const transport_error& err)> on_error;
  /// Where to put an incoming payload (must be at least desc.bytes long); default: heap.
  std::function<payload_buffer(const tensor_descriptor& desc)> allocate;
};

/// One connection to a peer. A resource: not copyable, shared by its owner and the transport.
class connection : non_copyable {
public:
  virtual ~connection() = default;

  /// Sends an encoded control message. `done` (may be empty) fires exactly once.
  virtual void send_control(std::vector<std::byte> bytes, completion done) = 0;
  /// Sends `payload` described by `desc` (desc.bytes is set to payload.size()). The memory
  /// must stay valid and unchanged until `done` fires (exactly once).
  virtual void send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                           completion done) = 0;
  /// Closes locally (see point 6 above). Idempotent.
  virtual void close() = 0;

  virtual connection_state state() const = 0;
  /// The peer, known once open (empty fields before).
  virtual peer_info peer() const = 0;
  /// Unique within its transport, for logs and maps.
  virtual std::uint64_t id() const = 0;
};

using connection_ptr = std::shared_ptr<connection>;

/// Called on the progress thread for each accepted (handshaken) connection; returns its
/// handlers.
using accept_handler = std::function<connection_handlers(const connection_ptr& conn)>;

/// Called on the progress thread for each peer a listener refuses before or at the handshake
/// (another protocol version, bytes that are not a Sailor hello, no hello in time): where it
/// came from and why. The refusal is also logged (warn). Over UCX, bytes that are not a UCX
/// connection request never reach the transport (UCX's connection manager drops them
/// silently), so only the TCP backend can report raw garbage on its port.
using refusal_handler = std::function<void(const address& peer, const transport_error& why)>;

/// A listening socket. Destroying it (or close()) stops accepting; accepted connections live on.
class listener {
public:
  virtual ~listener() = default;
  /// The address actually bound (with the port chosen when 0 was asked for).
  virtual address local_address() const = 0;
  virtual void close() = 0;
};

/// Options common to every backend.
struct transport_options {
  std::string local_name;  ///< this process's name, told to peers (e.g. node id)
  std::string local_zone;  ///< this process's zone, told to peers (used by the link shaper)
  /// Version announced in the handshake; tests change it to check refusals.
  std::uint32_t announced_version = protocol_version;
  /// Bound on the handshake of connect(): after it the connection fails with timed_out.
  double connect_timeout_s = 10.0;
  /// The job token (comm/auth.hpp), proven in every handshake by challenge and HMAC, never
  /// sent. Empty: no authentication, and peers that have a token refuse this side.
  std::string token;
  /// Bound on an accepted peer's handshake (hello and proof): later, it is refused and closed.
  double handshake_timeout_s = 5.0;
  /// Accepted connections whose handshake has not finished, at most, per transport; a
  /// listener closes further ones at once (logged once per burst).
  std::size_t max_unauthenticated = 64;
  /// Largest control message accepted after the handshake; a larger announced length closes
  /// the connection before anything is allocated for it.
  std::size_t max_control_bytes = std::size_t{16} << 20;
  /// Largest tensor payload accepted; likewise checked before allocating.
  std::uint64_t max_tensor_bytes = std::uint64_t{4} << 30;
  /// TLS (TCP backend only): this side's certificate and key, and the CA that signed every
  /// peer's (PEM files). All three, or none. Both sides of every connection present their
  /// certificate and check the other's against the CA (TLS 1.3, mutual); the job token is
  /// then proven inside the encrypted stream as without TLS.
  struct tls_files {
    std::string cert;
    std::string key;
    std::string ca;
    bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
  } tls;
};

/// A transport: makes listeners and connections, owns the progress thread.
class transport : non_copyable {
public:
  virtual ~transport() = default;

  /// Listens on `where`; errors if the address cannot be bound. `on_refused` (may be empty)
  /// hears of every peer refused at the door.
  virtual result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                                   refusal_handler on_refused) = 0;
  /// The same, refusals only logged.
  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept) {
    return listen(where, std::move(on_accept), refusal_handler{});
  }
  /// Starts connecting to `to`; see the state diagram above.
  virtual result<connection_ptr> connect(const address& to, connection_handlers handlers) = 0;
  /// Runs `fn` on the progress thread (after callbacks already queued).
  virtual void post(std::function<void()> fn) = 0;
  /// "ucx", "tcp", "shaped(ucx)", ...
  virtual std::string name() const = 0;
  virtual const transport_options& options() const = 0;
};

}  // namespace sailor::comm
