#pragma once
// What the UCX and TCP backends share: a connection's bookkeeping (identity, state, handlers,
// the handshake's outcome, the peer), both sides of the handshake over it, and the way the
// user's sends reach the progress thread, so that every backend accepts, refuses, sends and
// reports alike. Only the wire (how bytes move) differs.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>

#include "handshake.hpp"
#include "sailor/comm/transport.hpp"

namespace spdlog {
class logger;
}

namespace sailor::comm::detail {

/// The state every backend's connection keeps. Fields are the progress thread's, except
/// `state_` (atomic) and `peer_` (under `peer_mutex_`), which any thread may read.
class connection_base : public connection {
public:
  connection_base(std::uint64_t id, bool server) : id_(id), server_(server) {}

  connection_state state() const override { return state_.load(); }
  peer_info peer() const override {
    std::lock_guard lock(peer_mutex_);
    return peer_;
  }
  std::uint64_t id() const override { return id_; }

  /// Where the peer is (as seen from here).
  void set_remote(address remote) {
    std::lock_guard lock(peer_mutex_);
    peer_.remote = std::move(remote);
  }
  /// Who the peer is (from its handshake); `authenticated` when it proved the job token.
  void set_identity(std::string name, std::string zone, bool authenticated = false) {
    std::lock_guard lock(peer_mutex_);
    peer_.name = std::move(name);
    peer_.zone = std::move(zone);
    peer_.authenticated = authenticated;
  }

  const std::uint64_t id_;
  const bool server_;
  std::atomic<connection_state> state_{connection_state::connecting};
  bool handshaken_ = false;
  connection_handlers handlers_;
  accept_handler on_accept_;    ///< server side, until the hello arrives
  refusal_handler on_refused_;  ///< server side: told of a refusal at the door
  std::optional<transport_error> error_;
  std::chrono::steady_clock::time_point deadline_{};  ///< of the handshake
  // The job token's challenge (comm/auth.hpp).
  std::vector<std::byte> client_nonce_;
  std::vector<std::byte> server_nonce_;
  bool hello_seen_ = false;      ///< server: a hello arrived (a second one is garbage)
  bool awaiting_proof_ = false;  ///< server: hello answered, the client's proof not yet in
  hello claimed_;                ///< server: who the client says it is, until proven

private:
  mutable std::mutex peer_mutex_;
  peer_info peer_;
};

/// The client's hello (with a fresh challenge, kept in `c`, when this side has a token).
hello make_hello(connection_base& c, const transport_options& opts);

/// The server's side of the handshake: judges the hello in `bytes` and returns the reply to
/// send. Refused (garbage, wrong magic, another version, bad names, no token where one is
/// required): logged (warn, prefixed by `backend`), the connection is `failed` with the
/// reason and its listener's refusal handler is told; send the reply, then close. Accepted
/// without a token: the connection is open and knows the peer (`handshaken_`); send the
/// reply, then call `admit`. Accepted with a token: the reply carries this side's challenge
/// and proof; the connection waits (still `connecting`) for the client's proof.
hello_reply answer_hello(connection_base& c, std::span<const std::byte> bytes,
                         const transport_options& opts, spdlog::logger& log,
                         const char* backend);

/// The server takes the client's proof of the token. Accepted: the connection is open, knows
/// the peer as authenticated; call `admit`. Refused (wrong proof): as in answer_hello, and
/// the returned reply (accepted false) says why.
hello_reply take_proof(connection_base& c, std::span<const std::byte> proof,
                       const transport_options& opts, spdlog::logger& log, const char* backend);

/// Hands an accepted connection to its listener's accept handler (once), which gives the
/// connection its handlers.
void admit(connection_base& c, const connection_ptr& self);

/// What the client does with the server's reply: fail with `error`, or send `proof` (when
/// not empty, as the handshake's third message) and then run on_open.
struct reply_outcome {
  std::optional<transport_error> error;
  std::vector<std::byte> proof;
};

/// The client's side: takes the server's reply. Errors: garbage, refused (protocol_mismatch
/// when the versions differ), or a server that does not prove the job token this side holds.
/// Otherwise the connection is open and knows the peer.
reply_outcome take_hello_reply(connection_base& c, std::span<const std::byte> bytes,
                               const transport_options& opts);

/// Marks `c` failed with `err` (the caller has checked it was neither closed nor failed) and
/// returns the on_error handler to call, if the failure is the user's to hear: a client's, or
/// an accepted server connection's. A server connection that fails before its handshake is a
/// refusal at the door instead: logged (warn) and told to the listener's refusal handler.
std::function<void(const transport_error&)> mark_failed(connection_base& c, transport_error err,
                                                        spdlog::logger& log,
                                                        const char* backend);

/// The tasks other threads hand a backend's progress thread, and the eventfd that wakes it.
class task_queue : non_copyable {
public:
  task_queue();
  ~task_queue();

  /// The fd to poll (readable after a post or stop); clear_wakeups() once it fired.
  int wake_fd() const { return fd_; }
  /// Queues `fn` and wakes the thread; returns false (and drops `fn`) once stop() was called.
  bool post(std::function<void()> fn);
  /// Takes the queued tasks; `stopping` tells whether stop() was called.
  std::vector<std::function<void()>> take(bool& stopping);
  /// Whether a task waits or stop() was called: the thread must not sleep.
  bool pending() const;
  /// Refuses later posts and wakes the thread.
  void stop();
  void clear_wakeups();

private:
  void wake();
  int fd_ = -1;
  mutable std::mutex mutex_;
  std::vector<std::function<void()>> queue_;
  bool stopping_ = false;
};

/// A backend's listener: closing or destroying it asks its core to stop listening (`key`
/// names the listener to the core). The core may already be gone.
template <class Core, class Key>
class core_listener final : public listener {
public:
  core_listener(std::weak_ptr<Core> core, Key key, address bound)
      : core_(std::move(core)), key_(key), bound_(std::move(bound)) {}
  ~core_listener() override { close(); }
  address local_address() const override { return bound_; }
  void close() override {
    if (closed_.exchange(true)) return;
    if (auto core = core_.lock()) core->close_listener(key_);
  }

private:
  std::weak_ptr<Core> core_;
  Key key_;
  address bound_;
  std::atomic<bool> closed_{false};
};

/// A backend's transport: the user's handle on its core (which owns the progress thread and
/// has listen, connect, post, stop and common_options). Destroying it stops the core.
template <class Core>
class core_transport final : public transport {
public:
  core_transport(std::shared_ptr<Core> core, std::string name)
      : core_(std::move(core)), name_(std::move(name)) {}
  ~core_transport() override { core_->stop(); }
  using transport::listen;
  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused) override {
    return core_->listen(where, std::move(on_accept), std::move(on_refused));
  }
  result<connection_ptr> connect(const address& to, connection_handlers handlers) override {
    return core_->connect(to, std::move(handlers));
  }
  void post(std::function<void()> fn) override { core_->post(std::move(fn)); }
  std::string name() const override { return name_; }
  const transport_options& options() const override { return core_->common_options(); }

private:
  std::shared_ptr<Core> core_;
  std::string name_;
};

/// A message on its way out until its backend has sent it: its header (a tensor's encoded
/// descriptor, a handshake message), and the bytes the send owns (a control message) or else
/// the payload that the user keeps alive until `done` fires.
struct outgoing_message {
  std::vector<std::byte> header;
  std::vector<std::byte> owned;
  std::span<const std::byte> payload;
  completion done;
};

/// The user's two kinds of message (connection::send_control, connection::send_tensor).
enum class user_message { control, tensor };

/// Hands a send to the progress thread of the core behind `weak`: `issue(core, done)` runs
/// there. `done` fires exactly once: from `issue`'s send, or with errc::closed when the
/// transport is gone or shuts down before the task runs.
template <class Core, class Issue>
void post_send(const std::weak_ptr<Core>& weak, completion done, Issue issue) {
  auto core = weak.lock();
  if (!core) {
    complete(done, transport_error{errc::closed, "transport is shut down"});
    return;
  }
  auto guard = std::make_shared<completion_guard>(std::move(done));
  core->post([core, guard, issue = std::move(issue)]() mutable { issue(*core, guard->take()); });
}

/// A backend's connection: connection_base, the core whose progress thread drives it, and the
/// user's sends, which every backend hands that thread alike; there the core sends each with
/// `send_user(self, kind, header, owned, payload, done)` (`done` as in post_send). `Derived` is
/// the backend's connection class.
template <class Core, class Derived>
class core_connection : public connection_base, public std::enable_shared_from_this<Derived> {
public:
  core_connection(std::weak_ptr<Core> core, std::uint64_t id, bool server)
      : connection_base(id, server), core_(std::move(core)) {}

  void send_control(std::vector<std::byte> bytes, completion done) override {
    auto issue = [self = this->shared_from_this(), bytes = std::move(bytes)](
                     Core& core, completion sent) mutable {
      core.send_user(self, user_message::control, {}, std::move(bytes), {}, std::move(sent));
    };
    post_send(core_, std::move(done), std::move(issue));
  }
  void send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                   completion done) override {
    desc.bytes = payload.size();
    auto issue = [self = this->shared_from_this(), header = encode_tensor_header(desc),
                  payload](Core& core, completion sent) mutable {
      core.send_user(self, user_message::tensor, std::move(header), {}, payload, std::move(sent));
    };
    post_send(core_, std::move(done), std::move(issue));
  }

  const std::weak_ptr<Core> core_;  ///< any thread may lock it
};

/// Closes `self` from this side, on the progress thread of the core behind `weak` (nothing when
/// the transport is gone): a connection already closed or failed is left as it is; otherwise
/// it becomes closed with errc::closed, and `finish(core)` does the backend's part (what still
/// goes out, what is released).
template <class Core, class Connection, class Finish>
void post_close(const std::weak_ptr<Core>& weak, std::shared_ptr<Connection> self, Finish finish) {
  auto core = weak.lock();
  if (!core) return;
  core->post([core, self = std::move(self), finish = std::move(finish)]() mutable {
    auto s = self->state_.load();
    if (s == connection_state::closed || s == connection_state::failed) return;
    self->state_ = connection_state::closed;
    self->error_ = transport_error{errc::closed, "connection closed locally"};
    finish(core);
  });
}

/// Resolves an IPv4 host name or literal; `why` says what failed.
std::optional<sockaddr_in> resolve(const address& a, std::string* why);
/// The host:port of an IPv4 socket address (empty for another family).
address from_sockaddr(const sockaddr_storage& ss);
address from_sockaddr(const sockaddr_in& sa);

}  // namespace sailor::comm::detail
