// Links over the comm module's transports: each frame is one control message.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "sailor/actors/link.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::actors {
namespace {

// Frames that arrive before start() are kept and delivered by start(), so that no message is
// lost between the transport's accept and the bridge taking the link.
class comm_link final : public link, public std::enable_shared_from_this<comm_link> {
public:
  explicit comm_link(std::string peer) : peer_(std::move(peer)) {}

  void attach(comm::connection_ptr connection) {
    std::lock_guard<std::mutex> guard{mutex_};
    connection_ = std::move(connection);
  }

  /// Handlers for the transport, forwarding into this link while it lives.
  comm::connection_handlers forwarders() {
    std::weak_ptr<comm_link> weak = shared_from_this();
    comm::connection_handlers h;
    h.on_open = [weak] {
      if (auto self = weak.lock())
        self->opened(std::nullopt);
    };
    h.on_control = [weak](std::vector<std::byte> bytes) {
      if (auto self = weak.lock())
        self->arrived(std::move(bytes));
    };
    h.on_error = [weak](const comm::transport_error& err) {
      if (auto self = weak.lock()) {
        self->opened(err);
        self->close(err.to_string());
      }
    };
    return h;
  }

  /// Waits until the handshake is done; returns the error if it failed.
  std::optional<comm::transport_error> wait_open(int timeout_ms) {
    std::unique_lock<std::mutex> lock{mutex_};
    if (!open_changed_.wait_for(lock, std::chrono::milliseconds{timeout_ms},
                                [this] { return open_done_; }))
      return comm::transport_error{comm::errc::timed_out,
                                   "no answer to the handshake within " +
                                     std::to_string(timeout_ms) + " ms"};
    return open_error_;
  }

  void start(link_handlers handlers) override {
    std::deque<std::vector<char>> early;
    bool already_closed = false;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      handlers_ = std::move(handlers);
      started_ = true;
      early.swap(early_);
      already_closed = closed_;
    }
    for (auto& frame : early)
      if (handlers_.on_frame)
        handlers_.on_frame(std::move(frame));
    // Failed before anyone listened: tell the new owner now.
    if (already_closed && handlers_.on_closed)
      handlers_.on_closed(close_reason_);
  }

  bool send(const std::vector<char>& frame) override {
    comm::connection_ptr connection;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (closed_)
        return false;
      connection = connection_;
    }
    if (!connection)
      return false;
    std::vector<std::byte> bytes(frame.size());
    std::memcpy(bytes.data(), frame.data(), frame.size());
    {
      std::lock_guard<std::mutex> guard{mutex_};
      ++in_flight_;
    }
    std::weak_ptr<comm_link> weak = shared_from_this();
    connection->send_control(std::move(bytes), [weak](const comm::op_status&) {
      if (auto self = weak.lock())
        self->sent();
    });
    return connection->state() != comm::connection_state::failed &&
           connection->state() != comm::connection_state::closed;
  }

  void flush(std::chrono::milliseconds limit) override {
    std::unique_lock<std::mutex> lock{mutex_};
    in_flight_changed_.wait_for(lock, limit, [this] { return in_flight_ == 0; });
  }

  void close(const std::string& reason) override {
    comm::connection_ptr connection;
    std::function<void(const std::string&)> on_closed;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (closed_)
        return;
      closed_ = true;
      close_reason_ = reason;
      connection = connection_;
      on_closed = handlers_.on_closed;
    }
    if (connection)
      connection->close();
    if (on_closed)
      on_closed(reason);
  }

  const std::string& peer() const override { return peer_; }
  std::string peer_name() const override {
    std::lock_guard<std::mutex> guard{mutex_};
    return connection_ ? connection_->peer().name : std::string{};
  }

private:
  void sent() {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      --in_flight_;
    }
    in_flight_changed_.notify_all();
  }

  void opened(std::optional<comm::transport_error> error) {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (open_done_)
        return;
      open_done_ = true;
      open_error_ = std::move(error);
    }
    open_changed_.notify_all();
  }

  void arrived(std::vector<std::byte> bytes) {
    std::vector<char> frame(bytes.size());
    std::memcpy(frame.data(), bytes.data(), bytes.size());
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (closed_)
        return;
      if (!started_) {
        early_.push_back(std::move(frame));
        return;
      }
    }
    if (handlers_.on_frame)
      handlers_.on_frame(std::move(frame));
  }

  std::string peer_;
  mutable std::mutex mutex_;
  std::condition_variable open_changed_;
  std::condition_variable in_flight_changed_;
  int in_flight_ = 0;  // frames sent whose completion has not run
  comm::connection_ptr connection_;
  link_handlers handlers_;
  std::deque<std::vector<char>> early_;
  bool started_ = false;
  bool closed_ = false;
  std::string close_reason_;
  bool open_done_ = false;
  std::optional<comm::transport_error> open_error_;
};

class comm_listener final : public link_listener {
public:
  comm_listener(std::unique_ptr<comm::listener> inner) : inner_(std::move(inner)) {}
  ~comm_listener() override { inner_->close(); }
  std::uint16_t port() const override { return inner_->local_address().port; }

private:
  std::unique_ptr<comm::listener> inner_;
};

}  // namespace

result<std::unique_ptr<link_listener>> comm_listen(
  comm::transport& transport, const std::string& host, std::uint16_t port,
  accept_handler on_accept,
  std::function<void(const std::string& peer, const std::string& reason)> on_refused) {
  comm::refusal_handler told;
  if (on_refused)
    told = [on_refused](const comm::address& peer, const comm::transport_error& why) {
      on_refused(peer.to_string(), why.message);
    };
  auto listener = transport.listen(
    comm::address{host, port}, [on_accept](const comm::connection_ptr& connection) {
      auto info = connection->peer();
      auto l = std::make_shared<comm_link>(
        (info.name.empty() ? std::string{} : info.name + "@") + info.remote.to_string());
      l->attach(connection);
      auto handlers = l->forwarders();
      on_accept(l);
      return handlers;
    },
    std::move(told));
  if (!listener)
    return listener.error();
  return std::unique_ptr<link_listener>(new comm_listener(std::move(*listener)));
}

result<std::shared_ptr<link>> comm_connect(comm::transport& transport, const std::string& host,
                                           std::uint16_t port, int timeout_ms) {
  comm::address to{host, port};
  auto l = std::make_shared<comm_link>(to.to_string());
  auto connection = transport.connect(to, l->forwarders());
  if (!connection)
    return connection.error();
  l->attach(*connection);
  if (auto err = l->wait_open(timeout_ms)) {
    l->close(err->to_string());
    // A handshake the peer (or this side) refused, for the job token, the protocol version,
    // TLS or the name, fails the same way on every try: the caller's input is wrong. Anything
    // else (nobody listening yet, a dropped or slow connection) may pass on a later try.
    const bool refused =
      err->code == comm::errc::refused || err->code == comm::errc::protocol_mismatch;
    return sailor::error::of(refused ? error_kind::invalid_input : error_kind::disconnected, "", "",
                             "cannot connect to " + to.to_string() + " over " + transport.name() +
                               ": " + err->to_string());
  }
  return std::shared_ptr<link>(l);
}

}  // namespace sailor::actors
