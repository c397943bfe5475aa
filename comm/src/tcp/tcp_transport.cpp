// The plain TCP backend: non-blocking sockets and one poll() thread per transport (the
// progress thread; every callback runs on it). Frames:
//   [frame_header 24 bytes][header bytes][payload bytes]
// kinds: hello, hello_reply (header = Cap'n Proto Hello/HelloReply), control (payload =
// envelope bytes), tensor (header = Cap'n Proto TensorHeader, payload = raw bytes). Payloads
// are written with writev() from the caller's buffer and read straight into the receive
// buffer (the allocator's, if any). TCP keeps order, so no sequence numbers are needed.

#include "sailor/comm/tcp.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "../connection_base.hpp"
#include "../handshake.hpp"
#include "sailor/comm/messages.hpp"
#include "sailor/config/log.hpp"

namespace sailor::comm {
namespace {

using clock_type = std::chrono::steady_clock;
using detail::from_sockaddr;
using detail::resolve;

constexpr std::uint32_t frame_magic = 0x524c4153;  // "SALR"
enum frame_kind : std::uint8_t { kind_hello = 0, kind_hello_reply = 1, kind_control = 2, kind_tensor = 3 };

struct frame_header {
  std::uint32_t magic = frame_magic;
  std::uint8_t kind = 0;
  std::uint8_t pad[3] = {0, 0, 0};
  std::uint32_t header_len = 0;
  std::uint32_t reserved = 0;
  std::uint64_t payload_len = 0;
};
static_assert(sizeof(frame_header) == 24);

constexpr std::uint32_t max_header_len = 1 << 20;
constexpr std::uint64_t max_payload_len = 1ull << 40;

class tcp_core;

struct out_frame {
  frame_header fh;
  std::vector<std::byte> header;
  std::vector<std::byte> owned;
  std::span<const std::byte> payload;
  completion done;
  std::size_t written = 0;
  std::size_t total() const { return sizeof(fh) + header.size() + payload.size(); }
};

class tcp_connection final : public detail::connection_base,
                             public std::enable_shared_from_this<tcp_connection> {
public:
  tcp_connection(std::weak_ptr<tcp_core> core, std::uint64_t id, bool server)
      : connection_base(id, server), core_(std::move(core)) {}
  ~tcp_connection() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void send_control(std::vector<std::byte> bytes, completion done) override;
  void send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                   completion done) override;
  void close() override;

  // ---- progress thread only ----
  std::weak_ptr<tcp_core> core_;
  int fd_ = -1;
  bool connected_ = false;  // the TCP connect finished (client)
  std::deque<out_frame> out_;
  // receive state
  frame_header in_fh_{};
  std::size_t in_fh_got_ = 0;
  std::vector<std::byte> in_header_;
  std::size_t in_header_got_ = 0;
  bool in_have_header_ = false;
  tensor_descriptor in_desc_;
  std::vector<std::byte> in_control_;
  payload_buffer in_payload_;
  std::byte* in_dest_ = nullptr;
  std::size_t in_payload_got_ = 0;
  bool in_payload_ready_ = false;
};

struct tcp_listener_state {
  int fd = -1;
  accept_handler on_accept;
  refusal_handler on_refused;
  address bound;
};

class tcp_core : public std::enable_shared_from_this<tcp_core> {
public:
  explicit tcp_core(transport_options opts) : opts_(std::move(opts)), log_(log::get("comm")) {}
  ~tcp_core() { stop(); }

  void start();
  void stop();
  void post(std::function<void()> fn);
  bool on_thread() const { return std::this_thread::get_id() == thread_id_; }

  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused);
  result<connection_ptr> connect(const address& to, connection_handlers handlers);
  void close_listener(int fd);
  const transport_options& common_options() const { return opts_; }

  void loop();
  void queue_frame(const std::shared_ptr<tcp_connection>& c, std::uint8_t kind,
                   std::vector<std::byte> header, std::vector<std::byte> owned,
                   std::span<const std::byte> payload, completion done);
  void flush(const std::shared_ptr<tcp_connection>& c);
  void on_readable(const std::shared_ptr<tcp_connection>& c);
  void on_frame(const std::shared_ptr<tcp_connection>& c);
  bool start_payload(const std::shared_ptr<tcp_connection>& c);
  void fail(const std::shared_ptr<tcp_connection>& c, transport_error err);
  void drop(const std::shared_ptr<tcp_connection>& c, const op_status& st);
  void accept_from(tcp_listener_state& l);

  transport_options opts_;
  std::shared_ptr<spdlog::logger> log_;
  detail::task_queue tasks_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> next_id_{1};
  // progress thread only
  std::map<std::uint64_t, std::shared_ptr<tcp_connection>> conns_;
  std::map<int, std::unique_ptr<tcp_listener_state>> listeners_;
};

using tcp_listener = detail::core_listener<tcp_core, int>;

void set_socket_options(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// ---------------------------------------------------------------- life

void tcp_core::start() {
  running_ = true;
  std::promise<void> ready;
  auto f = ready.get_future();
  thread_ = std::thread([this, &ready] {
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

void tcp_core::loop() {
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<tcp_connection>> polled;
  std::vector<tcp_listener_state*> polled_listeners;
  while (true) {
    bool stopping = false;
    auto tasks = tasks_.take(stopping);
    if (stopping) break;
    for (auto& t : tasks) t();

    // Deadlines of handshakes.
    auto now = clock_type::now();
    bool any_connecting = false;
    std::vector<std::shared_ptr<tcp_connection>> late;
    for (auto& [id, c] : conns_) {
      if (c->state_ == connection_state::connecting || c->state_ == connection_state::closed) {
        any_connecting = true;
        if (now > c->deadline_) late.push_back(c);
      }
    }
    for (auto& c : late) {
      if (c->state_ == connection_state::closed) {
        drop(c, transport_error{errc::timed_out, "peer did not drain the connection after close()"});
        continue;
      }
      fail(c, {errc::timed_out, "handshake with " + c->peer().remote.to_string() +
                                    " did not finish in time"});
    }

    fds.clear();
    polled.clear();
    polled_listeners.clear();
    fds.push_back({tasks_.wake_fd(), POLLIN, 0});
    for (auto& [fd, l] : listeners_) {
      fds.push_back({fd, POLLIN, 0});
      polled_listeners.push_back(l.get());
    }
    for (auto& [id, c] : conns_) {
      short ev = POLLIN;
      if (!c->connected_ || !c->out_.empty()) ev |= POLLOUT;
      fds.push_back({c->fd_, ev, 0});
      polled.push_back(c);
    }
    int n = ::poll(fds.data(), fds.size(), any_connecting ? 20 : 500);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) tasks_.clear_wakeups();
    std::size_t k = 1;
    for (auto* l : polled_listeners) {
      if (fds[k].revents & POLLIN) accept_from(*l);
      ++k;
    }
    for (auto& c : polled) {
      short re = fds[k++].revents;
      if (c->fd_ < 0 || re == 0) continue;
      if (!c->connected_ && (re & (POLLOUT | POLLERR | POLLHUP))) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(c->fd_, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          fail(c, {errc::disconnected, "cannot reach " + c->peer().remote.to_string() + ": " +
                                           std::strerror(err)});
          continue;
        }
        c->connected_ = true;
      }
      if (re & (POLLIN | POLLHUP | POLLERR)) on_readable(c);
      if (c->fd_ >= 0 && (re & POLLOUT)) flush(c);
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
}

// ---------------------------------------------------------------- listen / accept / connect

result<std::unique_ptr<listener>> tcp_core::listen(const address& where, accept_handler on_accept,
                                                   refusal_handler on_refused) {
  std::string why;
  auto sa = resolve(where, &why);
  if (!sa) return sailor::error{error_kind::invalid_input, why, "", 0, "address"};
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*sa), sizeof(*sa)) != 0 || ::listen(fd, 128) != 0) {
    std::string msg = "cannot listen on " + where.to_string() + ": " + std::strerror(errno);
    ::close(fd);
    return sailor::error{error_kind::failed, msg, "", 0, "address"};
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

void tcp_core::accept_from(tcp_listener_state& l) {
  while (true) {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC);
    if (fd < 0) return;
    set_socket_options(fd);
    auto c = std::make_shared<tcp_connection>(weak_from_this(), next_id_++, true);
    c->fd_ = fd;
    c->connected_ = true;
    c->on_accept_ = l.on_accept;
    c->on_refused_ = l.on_refused;
    c->set_remote(from_sockaddr(sa));
    c->deadline_ = clock_type::now() +
                   std::chrono::milliseconds(static_cast<long>(opts_.connect_timeout_s * 1000));
    conns_.emplace(c->id_, c);
  }
}

result<connection_ptr> tcp_core::connect(const address& to, connection_handlers handlers) {
  std::string why;
  auto sa = resolve(to, &why);
  if (!sa) return sailor::error{error_kind::invalid_input, why, "", 0, "address"};
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
    if (rc == 0) {
      c->connected_ = true;
    } else if (errno != EINPROGRESS) {
      fail(c, {errc::disconnected, "cannot reach " + c->peer().remote.to_string() + ": " +
                                       std::strerror(errno)});
      return;
    }
    detail::hello h{opts_.announced_version, opts_.local_name, opts_.local_zone};
    queue_frame(c, kind_hello, detail::encode_hello(h), {}, {}, nullptr);
  });
  return connection_ptr(c);
}

// ---------------------------------------------------------------- send

void tcp_core::queue_frame(const std::shared_ptr<tcp_connection>& c, std::uint8_t kind,
                           std::vector<std::byte> header, std::vector<std::byte> owned,
                           std::span<const std::byte> payload, completion done) {
  bool handshake = kind == kind_hello || kind == kind_hello_reply;
  if (c->fd_ < 0 || (!handshake && (c->state_ == connection_state::failed ||
                                    c->state_ == connection_state::closed))) {
    detail::complete(done, c->error_.value_or(transport_error{errc::closed, "connection closed"}));
    return;
  }
  out_frame f;
  f.fh.kind = kind;
  f.fh.header_len = static_cast<std::uint32_t>(header.size());
  f.header = std::move(header);
  f.owned = std::move(owned);
  f.payload = f.owned.empty() ? payload : std::span<const std::byte>(f.owned);
  f.fh.payload_len = f.payload.size();
  f.done = std::move(done);
  c->out_.push_back(std::move(f));
  if (c->connected_) flush(c);
}

void tcp_core::flush(const std::shared_ptr<tcp_connection>& c) {
  while (!c->out_.empty() && c->fd_ >= 0) {
    auto& f = c->out_.front();
    // The frame's three parts from where the last write stopped.
    iovec iov[3];
    int n = 0;
    std::size_t skip = f.written;
    auto add = [&](const void* p, std::size_t len) {
      if (skip >= len) {
        skip -= len;
        return;
      }
      iov[n].iov_base = const_cast<std::byte*>(static_cast<const std::byte*>(p) + skip);
      iov[n].iov_len = len - skip;
      skip = 0;
      ++n;
    };
    add(&f.fh, sizeof(f.fh));
    add(f.header.data(), f.header.size());
    add(f.payload.data(), f.payload.size());
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t w = n == 0 ? 0 : ::sendmsg(c->fd_, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      fail(c, {errc::disconnected, "send to " + c->peer().remote.to_string() + " failed: " +
                                       std::strerror(errno)});
      return;
    }
    f.written += static_cast<std::size_t>(w);
    if (f.written < f.total()) continue;
    auto done = std::move(f.done);
    bool refuse_close = f.fh.kind == kind_hello_reply && c->state_ == connection_state::failed;
    c->out_.pop_front();
    detail::complete(done, std::nullopt);
    if (refuse_close) {
      drop(c, c->error_);
      return;
    }
  }
  if (c->out_.empty() && c->fd_ >= 0 && c->state_ == connection_state::closed) drop(c, c->error_);
}

// ---------------------------------------------------------------- receive

void tcp_core::on_readable(const std::shared_ptr<tcp_connection>& c) {
  // Bounded per wake-up so one busy peer does not starve the others.
  for (int round = 0; round < 64 && c->fd_ >= 0; ++round) {
    void* dest;
    std::size_t want;
    if (c->in_fh_got_ < sizeof(frame_header)) {
      dest = reinterpret_cast<std::byte*>(&c->in_fh_) + c->in_fh_got_;
      want = sizeof(frame_header) - c->in_fh_got_;
    } else if (!c->in_have_header_) {
      dest = c->in_header_.data() + c->in_header_got_;
      want = c->in_header_.size() - c->in_header_got_;
    } else {
      dest = c->in_dest_ + c->in_payload_got_;
      want = c->in_fh_.payload_len - c->in_payload_got_;
    }
    ssize_t r = want == 0 ? 0 : ::recv(c->fd_, dest, want, 0);
    if (want != 0) {
      if (r == 0) {
        fail(c, {errc::disconnected, "peer " + c->peer().remote.to_string() + " closed the connection"});
        return;
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        fail(c, {errc::disconnected, "receive from " + c->peer().remote.to_string() + " failed: " +
                                         std::strerror(errno)});
        return;
      }
    }
    std::size_t got = static_cast<std::size_t>(std::max<ssize_t>(r, 0));
    if (c->in_fh_got_ < sizeof(frame_header)) {
      c->in_fh_got_ += got;
      if (c->in_fh_got_ < sizeof(frame_header)) continue;
      const auto& fh = c->in_fh_;
      if (fh.magic != frame_magic || fh.kind > kind_tensor || fh.header_len > max_header_len ||
          fh.payload_len > max_payload_len) {
        fail(c, {errc::invalid_message, "garbage from " + c->peer().remote.to_string() +
                                            " (not a Sailor frame)"});
        return;
      }
      c->in_header_.assign(fh.header_len, std::byte{0});
      c->in_header_got_ = 0;
      c->in_have_header_ = false;
      if (fh.header_len == 0) {
        c->in_have_header_ = true;
        if (!start_payload(c)) return;
      }
    } else if (!c->in_have_header_) {
      c->in_header_got_ += got;
      if (c->in_header_got_ < c->in_header_.size()) continue;
      c->in_have_header_ = true;
      if (!start_payload(c)) return;
    } else {
      c->in_payload_got_ += got;
    }
    if (c->in_have_header_ && c->in_payload_got_ == c->in_fh_.payload_len) {
      on_frame(c);
      c->in_fh_got_ = 0;
      c->in_have_header_ = false;
      c->in_payload_got_ = 0;
    }
  }
}

// The header is complete: decide where the payload goes.
bool tcp_core::start_payload(const std::shared_ptr<tcp_connection>& c) {
  const auto& fh = c->in_fh_;
  c->in_payload_got_ = 0;
  bool handshake = fh.kind == kind_hello || fh.kind == kind_hello_reply;
  if (handshake != !c->handshaken_) {
    fail(c, {errc::invalid_message, handshake ? "unexpected handshake frame"
                                              : "message before the handshake"});
    return false;
  }
  if (handshake || fh.kind == kind_control) {
    if (fh.payload_len > (64u << 20)) {
      fail(c, {errc::invalid_message, "control message of " + std::to_string(fh.payload_len) +
                                          " bytes"});
      return false;
    }
    c->in_control_.assign(fh.payload_len, std::byte{0});
    c->in_dest_ = c->in_control_.data();
    return true;
  }
  auto decoded = decode_tensor_header(c->in_header_);
  if (auto* err = std::get_if<transport_error>(&decoded)) {
    fail(c, *err);
    return false;
  }
  c->in_desc_ = std::move(std::get<tensor_descriptor>(decoded));
  if (c->in_desc_.bytes != fh.payload_len) {
    fail(c, {errc::invalid_message, "tensor header and frame disagree on the payload size"});
    return false;
  }
  if (c->handlers_.allocate) {
    c->in_payload_ = c->handlers_.allocate(c->in_desc_);
    if (c->in_payload_.size() < fh.payload_len) {
      fail(c, {errc::invalid_argument, "allocate() gave a buffer too small"});
      return false;
    }
  } else {
    c->in_payload_ = payload_buffer::allocate(fh.payload_len);
  }
  c->in_dest_ = c->in_payload_.data();
  return true;
}

void tcp_core::on_frame(const std::shared_ptr<tcp_connection>& c) {
  switch (c->in_fh_.kind) {
    case kind_hello: {
      if (!c->server_) {
        fail(c, {errc::invalid_message, "hello sent to a client"});
        return;
      }
      auto reply = detail::answer_hello(*c, c->in_header_, opts_, *log_, "tcp");
      queue_frame(c, kind_hello_reply, detail::encode_hello_reply(reply), {}, {}, nullptr);
      if (reply.accepted) detail::admit(*c, c);
      return;
    }
    case kind_hello_reply: {
      if (c->server_) {
        fail(c, {errc::invalid_message, "hello reply sent to a server"});
        return;
      }
      if (auto err = detail::take_hello_reply(*c, c->in_header_, opts_)) {
        fail(c, *err);
        return;
      }
      if (c->handlers_.on_open) c->handlers_.on_open();
      return;
    }
    case kind_control:
      if (c->state_ == connection_state::open && c->handlers_.on_control)
        c->handlers_.on_control(std::move(c->in_control_));
      c->in_control_.clear();
      return;
    case kind_tensor:
      if (c->state_ == connection_state::open && c->handlers_.on_tensor)
        c->handlers_.on_tensor(std::move(c->in_desc_), std::move(c->in_payload_));
      c->in_payload_ = {};
      return;
  }
}

// ---------------------------------------------------------------- failure and close

// Completes every queued send with `st`, closes the socket and forgets the connection.
void tcp_core::drop(const std::shared_ptr<tcp_connection>& c, const op_status& st) {
  auto out = std::move(c->out_);
  c->out_.clear();
  if (c->fd_ >= 0) ::close(c->fd_);
  c->fd_ = -1;
  conns_.erase(c->id_);
  for (auto& f : out) {
    // A frame already partly written when the connection went away did not arrive either.
    detail::complete(f.done, st ? st : op_status(transport_error{errc::closed, "connection closed"}));
  }
}

void tcp_core::fail(const std::shared_ptr<tcp_connection>& c, transport_error err) {
  auto s = c->state_.load();
  if (s == connection_state::closed || s == connection_state::failed) {
    drop(c, c->error_ ? c->error_ : op_status(err));
    return;
  }
  auto on_error = detail::mark_failed(*c, err, *log_, "tcp");
  drop(c, err);
  if (on_error) on_error(err);
}

void tcp_connection::send_control(std::vector<std::byte> bytes, completion done) {
  auto issue = [self = shared_from_this(), bytes = std::move(bytes)](tcp_core& core,
                                                                      completion sent) mutable {
    core.queue_frame(self, kind_control, {}, std::move(bytes), {}, std::move(sent));
  };
  detail::post_send(core_, std::move(done), std::move(issue));
}

void tcp_connection::send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                                 completion done) {
  desc.bytes = payload.size();
  auto issue = [self = shared_from_this(), header = encode_tensor_header(desc),
                payload](tcp_core& core, completion sent) mutable {
    core.queue_frame(self, kind_tensor, std::move(header), {}, payload, std::move(sent));
  };
  detail::post_send(core_, std::move(done), std::move(issue));
}

void tcp_connection::close() {
  auto core = core_.lock();
  if (!core) return;
  core->post([core, self = shared_from_this()] {
    auto s = self->state_.load();
    if (s == connection_state::closed || s == connection_state::failed) return;
    self->state_ = connection_state::closed;
    self->error_ = transport_error{errc::closed, "connection closed locally"};
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

}  // namespace

result<std::unique_ptr<transport>> make_tcp_transport(const transport_options& options) {
  auto core = std::make_shared<tcp_core>(options);
  core->start();
  return std::unique_ptr<transport>(new detail::core_transport<tcp_core>(std::move(core), "tcp"));
}

}  // namespace sailor::comm
