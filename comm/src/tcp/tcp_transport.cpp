// The plain TCP backend: non-blocking sockets and one poll() thread per transport (the
// progress thread; every callback runs on it). Frames:
//   [frame_header 24 bytes][header bytes][payload bytes]
// kinds: hello, hello_reply (header = Cap'n Proto Hello/HelloReply), auth (header = the
// client's proof of the job token, comm/auth.hpp), control (payload = envelope bytes), tensor
// (header = Cap'n Proto TensorHeader, payload = raw bytes). Every length in a frame header is
// checked against the limit of its kind, and the kind against the connection's state, before
// anything is allocated: before its handshake a peer can make this side hold at most
// max_handshake_bytes. Payloads
// are written with writev() from the caller's buffer and read straight into the receive
// buffer (the allocator's, if any). TCP keeps order, so no sequence numbers are needed.
#include "sailor/comm/tcp.hpp"

#include "tcp_core.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <utility>

#include "handshake.hpp"

namespace sailor::comm::tcp_backend {


// ---------------------------------------------------------------- life

void tcp_core::start() {
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  running_ = true;
  std::promise<void> ready;
  auto f = ready.get_future();
  thread_ = std::thread([this, &ready] {
    // OpenSSL writes with write(), not send(MSG_NOSIGNAL): a peer that went away must be
    // an EPIPE on this thread, not a SIGPIPE that ends the process.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    thread_id_ = std::this_thread::get_id();
    ready.set_value();
    loop();
  });
  f.wait();
}

void tcp_core::stop() {
  if (!running_.exchange(false)) return;
  if (on_thread()) {
    log_->critical("[tcp] the transport was destroyed from one of its own callbacks");
    std::abort();
  }
  tasks_.stop();
  if (thread_.joinable()) thread_.join();
}

void tcp_core::post(std::function<void()> fn) { tasks_.post(std::move(fn)); }

// A transport callback or a task that throws must not end the progress thread (and with it
// the process): the exception closes the connection it concerns, logged once.
template <class F>
void tcp_core::guarded(const std::shared_ptr<tcp_connection>& c, const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    transport_error err{errc::transport_failure, std::string(what) + " threw: " + e.what()};
    log_->error("[tcp] connection {} from {}: {}", c->id_, c->peer().remote.to_string(),
                err.message);
    try {
      fail(c, std::move(err));
    } catch (...) {
      drop(c, transport_error{errc::transport_failure, "a handler threw while failing"});
    }
  } catch (...) {
    log_->error("[tcp] connection {}: {} threw a non-exception", c->id_, what);
    drop(c, transport_error{errc::transport_failure, "a handler threw"});
  }
}

void tcp_core::run_tasks(std::vector<std::function<void()>>& tasks) {
  for (auto& t : tasks) {
    try {
      t();
    } catch (const std::exception& e) {
      log_->error("[tcp] a task on the progress thread threw: {}", e.what());
    } catch (...) {
      log_->error("[tcp] a task on the progress thread threw");
    }
  }
}

void tcp_core::check_deadlines(bool& any_connecting) {
  auto now = clock_type::now();
  std::vector<std::shared_ptr<tcp_connection>> late;
  for (auto& [id, c] : conns_) {
    if (c->state_ == connection_state::connecting || c->state_ == connection_state::closed) {
      any_connecting = true;
      if (now > c->deadline_) late.push_back(c);
    }
  }
  for (auto& c : late) {
    guarded(c, "a deadline's handler", [&] {
      if (c->state_ == connection_state::closed) {
        drop(c, transport_error{errc::timed_out, "peer did not drain the connection after close()"});
        return;
      }
      fail(c, {errc::timed_out, "handshake with " + c->peer().remote.to_string() +
                                    " did not finish in time"});
    });
  }
}

void tcp_core::loop() {
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<tcp_connection>> polled;
  std::vector<tcp_listener_state*> polled_listeners;
  while (true) {
    bool stopping = false;
    auto tasks = tasks_.take(stopping);
    run_tasks(tasks);  // what was asked before the stop is done first (as UCX's loop does)
    if (stopping) break;
    bool any_connecting = false;
    check_deadlines(any_connecting);

    fds.clear();
    polled.clear();
    polled_listeners.clear();
    fds.push_back({tasks_.wake_fd(), POLLIN, 0});
    for (auto& [fd, l] : listeners_) {
      fds.push_back({fd, POLLIN, 0});
      polled_listeners.push_back(l.get());
    }
    bool tls_buffered = false;  // decrypted bytes wait in a session: do not sleep
    for (auto& [id, c] : conns_) {
      short ev = POLLIN;
      if (!c->connected_ || !c->out_.empty() || c->tls_want_write_) ev |= POLLOUT;
      fds.push_back({c->fd_, ev, 0});
      polled.push_back(c);
      tls_buffered = tls_buffered || tls_pending(*c);
    }
    int n = ::poll(fds.data(), fds.size(), tls_buffered ? 0 : any_connecting ? 20 : 500);
    if (n < 0 && errno != EINTR) break;
    if (n < 0 || (n == 0 && !tls_buffered)) continue;
    if (fds[0].revents & POLLIN) tasks_.clear_wakeups();
    std::size_t k = 1;
    for (auto* l : polled_listeners) {
      if (fds[k].revents & POLLIN) accept_from(*l);
      ++k;
    }
    for (auto& c : polled) {
      short re = fds[k++].revents;
      if (tls_pending(*c)) re |= POLLIN;
      if (c->fd_ < 0 || re == 0) continue;
      guarded(c, "a receive or send", [&] { on_socket_event(c, re); });
    }
  }
  // Shut down: every connection completes its sends with errc::closed.
  auto conns = conns_;
  for (auto& [id, c] : conns) {
    if (c->state_ == connection_state::open || c->state_ == connection_state::connecting)
      c->state_ = connection_state::closed;
    drop(c, transport_error{errc::closed, "transport shut down"});
    // Handlers may hold their connection (decorators do): let go of them.
    c->handlers_ = {};
    c->on_accept_ = nullptr;
    c->on_refused_ = nullptr;
  }
  for (auto& [fd, l] : listeners_) ::close(fd);
  listeners_.clear();
  if (spare_fd_ >= 0) ::close(spare_fd_);
  spare_fd_ = -1;
}

// One connection's socket is ready: finish the TCP connect, then the TLS handshake (when the
// transport has TLS), then read and write frames.
void tcp_core::on_socket_event(const std::shared_ptr<tcp_connection>& c, short re) {
  if (!c->connected_ && (re & (POLLOUT | POLLERR | POLLHUP))) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(c->fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      fail(c, {errc::disconnected, "cannot reach " + c->peer().remote.to_string() + ": " +
                                       std::strerror(err)});
      return;
    }
    c->connected_ = true;
  }
  if (!c->connected_) return;
  if (c->ssl_ && !c->tls_done_) {
    std::string error;
    if (!advance_tls(*c, error)) {
      if (!error.empty()) fail(c, {errc::refused, error});
      return;
    }
    flush(c);  // the hello waits for the TLS handshake
    if (c->fd_ < 0) return;
  }
  if (re & (POLLIN | POLLHUP | POLLERR)) on_readable(c);
  if (c->fd_ >= 0 && (re & POLLOUT || c->tls_want_write_)) flush(c);
}

// ---------------------------------------------------------------- listen / accept / connect

result<std::unique_ptr<listener>> tcp_core::listen(const address& where, accept_handler on_accept,
                                                   refusal_handler on_refused) {
  std::string why;
  auto sa = resolve(where, &why);
  if (!sa) return sailor::error::invalid_input("address", why);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*sa), sizeof(*sa)) != 0 || ::listen(fd, 128) != 0) {
    std::string msg = "cannot listen on " + where.to_string() + ": " + std::strerror(errno);
    ::close(fd);
    return sailor::error::of(error_kind::failed, "", "address", msg);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  auto state = std::make_unique<tcp_listener_state>();
  state->fd = fd;
  state->on_accept = std::move(on_accept);
  state->on_refused = std::move(on_refused);
  state->bound = from_sockaddr(bound);
  auto b = state->bound;
  auto* raw = state.release();
  post([this, raw] { listeners_.emplace(raw->fd, std::unique_ptr<tcp_listener_state>(raw)); });
  return std::unique_ptr<listener>(new tcp_listener(weak_from_this(), fd, b));
}

void tcp_core::close_listener(int fd) {
  post([this, fd] {
    if (listeners_.erase(fd)) ::close(fd);
  });
}

// Makes room for one more connection waiting for its handshake (the cap on unauthenticated
// peers): over the cap, the one that has waited longest is refused. A real peer finishes its
// handshake in a round trip, so it is the idle and slow ones that go.
void tcp_core::make_room(const address& where) {
  std::size_t waiting = 0;
  std::shared_ptr<tcp_connection> oldest;
  for (auto& [id, c] : conns_) {
    if (!c->server_ || c->handshaken_ || c->state_ != connection_state::connecting) continue;
    ++waiting;
    if (!oldest || c->deadline_ < oldest->deadline_) oldest = c;
  }
  if (waiting < opts_.max_unauthenticated || !oldest) {
    shedding_ = false;
    return;
  }
  if (!shedding_)
    log_->warn("[tcp] {} peers are waiting for their handshake on {}: refusing the longest "
               "waiting ones",
               waiting, where.to_string());
  shedding_ = true;
  // Quietly: one line per burst above, not one per peer.
  oldest->on_refused_ = nullptr;
  oldest->state_ = connection_state::failed;
  oldest->error_ = transport_error{errc::refused, "too many peers waiting for their handshake"};
  drop(oldest, oldest->error_);
}

// Out of descriptors: accepts the next pending peer only to close it (else the listening
// socket stays readable and poll() spins).
void tcp_core::shed_connection(int listen_fd) {
  int fd = -1;
  if (spare_fd_ >= 0) {
    ::close(spare_fd_);
    fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (fd >= 0) ::close(fd);
}

void tcp_core::accept_from(tcp_listener_state& l) {
  // Bounded per wake-up so that a flood of peers does not starve the connections.
  for (int round = 0; round < 64; ++round) {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        log_->warn("[tcp] out of descriptors on {}: closing a new peer", l.bound.to_string());
        shed_connection(l.fd);
      }
      return;
    }
    make_room(l.bound);
    set_socket_options(fd);
    auto c = std::make_shared<tcp_connection>(weak_from_this(), next_id_++, true);
    c->fd_ = fd;
    c->connected_ = true;
    if (tls_) start_tls(*c, tls_.get());
    c->on_accept_ = l.on_accept;
    c->on_refused_ = l.on_refused;
    c->set_remote(from_sockaddr(sa));
    c->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                           opts_.handshake_timeout_s * 1000));
    conns_.emplace(c->id_, c);
  }
}

result<connection_ptr> tcp_core::connect(const address& to, connection_handlers handlers) {
  std::string why;
  auto sa = resolve(to, &why);
  if (!sa) return sailor::error::invalid_input("address", why);
  auto c = std::make_shared<tcp_connection>(weak_from_this(), next_id_++, false);
  c->handlers_ = std::move(handlers);
  c->set_remote(to);
  c->deadline_ = clock_type::now() +
                 std::chrono::milliseconds(static_cast<long>(opts_.connect_timeout_s * 1000));
  sockaddr_in addr = *sa;
  post([this, c, addr] {
    c->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    set_socket_options(c->fd_);
    int rc = ::connect(c->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    conns_.emplace(c->id_, c);
    if (tls_) start_tls(*c, tls_.get());
    if (rc == 0) {
      c->connected_ = true;
    } else if (errno != EINPROGRESS) {
      fail(c, {errc::disconnected, "cannot reach " + c->peer().remote.to_string() + ": " +
                                       std::strerror(errno)});
      return;
    }
    queue_frame(c, kind_hello, detail::encode_hello(detail::make_hello(*c, opts_)), {}, {},
                nullptr);
  });
  return connection_ptr(c);
}

void tcp_connection::close() {
  detail::post_close(core_, shared_from_this(), [self = shared_from_this()](const auto& core) {
    self->handlers_ = {};
    // What was issued before close() still goes out (see flush()); then the socket closes.
    // Bounded: a peer that stops reading gets connect_timeout_s to drain it.
    if (self->out_.empty() || self->fd_ < 0 || !self->connected_) {
      core->drop(self, self->error_);
      return;
    }
    self->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                              core->opts_.connect_timeout_s * 1000));
  });
}

}  // namespace sailor::comm::tcp_backend

namespace sailor::comm {


result<std::unique_ptr<transport>> make_tcp_transport(const transport_options& options) {
  using tcp_backend::tcp_core;
  auto core = std::make_shared<tcp_core>(options);
  if (options.tls.enabled()) {
    auto ctx = tcp_backend::make_tls_context(options.tls);
    if (!ctx) return ctx.error();
    core->tls_ = std::move(*ctx);
  }
  core->start();
  return std::unique_ptr<transport>(new detail::core_transport<tcp_core>(std::move(core), "tcp"));
}

}  // namespace sailor::comm
