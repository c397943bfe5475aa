// The UCX backend. One ucp worker, driven by one progress thread owned by `ucx_core`. UCX
// callbacks only record what happened (into `deferred_`); user callbacks run from the loop,
// outside UCX callbacks, so a user may call anything on the transport from them.
//
// Wire: active messages with the REPLY flag (so the receiver knows the endpoint):
//   am_hello (client->server, Hello), am_hello_reply (server->client, HelloReply),
//   am_control (data = envelope bytes), am_tensor (header = TensorHeader, data = payload).
// Every control and tensor AM carries an 8-byte sequence number first in its header: UCX may
// reorder the first messages of an endpoint (sent before wire-up finished) and receives
// complete out of order (rendezvous vs eager), so each connection delivers them by sequence
// number through `recvs_`. Messages that arrive before the handshake was handled are held.

#include "sailor/comm/ucx.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <ucp/api/ucp.h>

#include "handshake.hpp"
#include "sailor/comm/messages.hpp"
#include "sailor/config/log.hpp"

namespace sailor::comm {
namespace {

using clock_type = std::chrono::steady_clock;

enum am_id : unsigned { am_hello = 0, am_hello_reply = 1, am_control = 2, am_tensor = 3 };

class ucx_core;
class ucx_connection;

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

// One message being received; delivered when it and all before it are complete.
struct pending_recv {
  bool tensor = false;
  bool ready = false;
  std::vector<std::byte> control;
  tensor_descriptor desc;
  payload_buffer payload;
};

struct listener_state {
  std::uint64_t id = 0;
  ucp_listener_h handle = nullptr;
  accept_handler on_accept;
  refusal_handler on_refused;
  address bound;
  ucx_core* core = nullptr;
};

class ucx_connection final : public connection,
                             public std::enable_shared_from_this<ucx_connection> {
public:
  ucx_connection(std::weak_ptr<ucx_core> core, std::uint64_t id, bool server)
      : core_(std::move(core)), id_(id), server_(server) {}

  void send_control(std::vector<std::byte> bytes, completion done) override;
  void send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                   completion done) override;
  void close() override;
  connection_state state() const override { return state_.load(); }
  peer_info peer() const override {
    std::lock_guard lock(peer_mutex_);
    return peer_;
  }
  std::uint64_t id() const override { return id_; }

  // ---- progress thread only ----
  std::weak_ptr<ucx_core> core_;
  const std::uint64_t id_;
  const bool server_;
  std::atomic<connection_state> state_{connection_state::connecting};
  ucp_ep_h ep_ = nullptr;
  bool handshaken_ = false;
  connection_handlers handlers_;
  std::uint64_t send_seq_ = 0;     // last sequence number sent
  std::uint64_t deliver_seq_ = 1;  // next sequence number to deliver
  // Arrived before the handshake was handled: replayed through on_data afterwards.
  struct held_message {
    unsigned id;
    std::vector<std::byte> header;
    void* data;  // rndv or persistent descriptor, or points into `copy`
    size_t length;
    int kind;
    std::shared_ptr<std::vector<std::byte>> copy;
  };
  std::vector<held_message> held_;
  accept_handler on_accept_;  // server side, until the hello arrives
  refusal_handler on_refused_;  // server side: told of a refusal at the door
  std::optional<transport_error> error_;
  std::map<std::uint64_t, std::unique_ptr<pending_recv>> recvs_;
  clock_type::time_point deadline_{};
  mutable std::mutex peer_mutex_;
  peer_info peer_;
};

// What a send needs until it completes.
struct send_op {
  std::shared_ptr<ucx_connection> conn;
  completion done;
  std::vector<std::byte> header;
  std::vector<std::byte> owned;  // control bytes (the user's buffer for tensors)
};

struct recv_op {
  std::shared_ptr<ucx_connection> conn;
  pending_recv* slot;
};

class ucx_core : public std::enable_shared_from_this<ucx_core> {
public:
  explicit ucx_core(ucx_options opts) : opts_(std::move(opts)), log_(log::get("comm")) {}
  ~ucx_core() { stop(); }

  std::optional<sailor::error> start();
  void stop();
  void post(std::function<void()> fn);
  bool on_thread() const { return std::this_thread::get_id() == thread_id_; }
  template <class F>
  auto run_sync(F&& fn) -> decltype(fn());

  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused);
  result<connection_ptr> connect(const address& to, connection_handlers handlers);
  void close_listener(std::uint64_t id);

  // progress thread
  void send(const std::shared_ptr<ucx_connection>& c, unsigned id, std::vector<std::byte> header,
            std::vector<std::byte> owned, std::span<const std::byte> data, completion done,
            bool force_rndv);
  void fail(const std::shared_ptr<ucx_connection>& c, transport_error err);
  void close_conn(const std::shared_ptr<ucx_connection>& c, bool force);
  void deliver(const std::shared_ptr<ucx_connection>& c);
  void on_hello(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes);
  void on_hello_reply(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes);
  enum class data_kind { transient, persistent, rndv };
  // Takes one incoming control or tensor; returns what the AM callback should return.
  ucs_status_t on_data(const std::shared_ptr<ucx_connection>& c, unsigned id,
                       std::span<const std::byte> header, void* data, size_t length,
                       data_kind kind);
  ucs_status_t drop(void* data, data_kind kind);
  void replay_held(const std::shared_ptr<ucx_connection>& c);
  void release_held(const std::shared_ptr<ucx_connection>& c);

  static ucs_status_t am_callback(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param);
  static void ep_error_callback(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void conn_request_callback(ucp_conn_request_h request, void* arg);
  static void send_callback(void* request, ucs_status_t status, void* user_data);
  static void recv_callback(void* request, ucs_status_t status, size_t length, void* user_data);
  static void close_callback(void* request, ucs_status_t status, void* user_data);

  void loop();
  void check_deadlines();

  ucx_options opts_;
  std::shared_ptr<spdlog::logger> log_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int worker_fd_ = -1;
  int event_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread thread_;
  std::thread::id thread_id_;
  std::mutex mutex_;
  std::vector<std::function<void()>> queue_;
  bool stopping_ = false;
  std::atomic<bool> started_{false};
  std::atomic<std::uint64_t> next_id_{1};

  // progress thread only
  std::vector<std::function<void()>> deferred_;
  std::unordered_map<ucp_ep_h, std::shared_ptr<ucx_connection>> by_ep_;
  std::map<std::uint64_t, std::unique_ptr<listener_state>> listeners_;
  int closing_ = 0;
  bool on_callback_ = false;  // inside am_callback (vs. a deferred call)
  struct am_arg {
    ucx_core* core;
    unsigned id;
  };
  am_arg am_args_[4];
};

class ucx_listener final : public listener {
public:
  ucx_listener(std::weak_ptr<ucx_core> core, std::uint64_t id, address bound)
      : core_(std::move(core)), id_(id), bound_(std::move(bound)) {}
  ~ucx_listener() override { close(); }
  address local_address() const override { return bound_; }
  void close() override {
    if (closed_.exchange(true)) return;
    if (auto core = core_.lock()) core->close_listener(id_);
  }

private:
  std::weak_ptr<ucx_core> core_;
  std::uint64_t id_;
  address bound_;
  std::atomic<bool> closed_{false};
};

class ucx_transport final : public transport {
public:
  explicit ucx_transport(std::shared_ptr<ucx_core> core) : core_(std::move(core)) {}
  ~ucx_transport() override { core_->stop(); }
  using transport::listen;
  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused) override {
    return core_->listen(where, std::move(on_accept), std::move(on_refused));
  }
  result<connection_ptr> connect(const address& to, connection_handlers handlers) override {
    return core_->connect(to, std::move(handlers));
  }
  void post(std::function<void()> fn) override { core_->post(std::move(fn)); }
  std::string name() const override { return "ucx"; }
  const transport_options& options() const override { return core_->opts_.common; }

private:
  std::shared_ptr<ucx_core> core_;
};

sailor::error failed(std::string msg) { return {error_kind::failed, std::move(msg), "", 0, ""}; }

std::optional<sockaddr_in> resolve(const address& a, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(a.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    *why = "cannot resolve host '" + a.host + "': " + gai_strerror(rc);
    return std::nullopt;
  }
  sockaddr_in sa{};
  std::memcpy(&sa, res->ai_addr, sizeof(sa));
  ::freeaddrinfo(res);
  sa.sin_port = htons(a.port);
  return sa;
}

address from_sockaddr(const sockaddr_storage& ss) {
  address a;
  if (ss.ss_family == AF_INET) {
    auto* sa = reinterpret_cast<const sockaddr_in*>(&ss);
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &sa->sin_addr, buf, sizeof(buf));
    a.host = buf;
    a.port = ntohs(sa->sin_port);
  }
  return a;
}

// ---------------------------------------------------------------- core: life

std::optional<sailor::error> ucx_core::start() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return failed("ucp_config_read: " + status_text(st));
  for (const auto& [key, value] : opts_.ucx_config) {
    st = ucp_config_modify(config, key.c_str(), value.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return sailor::error{error_kind::invalid_input,
                           "UCX option " + key + "=" + value + ": " + status_text(st), "", 0,
                           "ucx_config"};
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) return failed("ucp_init: " + status_text(st));

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) return failed("ucp_worker_create: " + status_text(st));

  for (unsigned id = 0; id < 4; ++id) {
    am_args_[id] = am_arg{this, id};
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = &ucx_core::am_callback;
    hp.arg = &am_args_[id];
    st = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (st != UCS_OK) return failed("ucp_worker_set_am_recv_handler: " + status_text(st));
  }

  if (ucp_worker_get_efd(worker_, &worker_fd_) != UCS_OK) worker_fd_ = -1;
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = event_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  if (worker_fd_ >= 0) {
    ev.data.fd = worker_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker_fd_, &ev);
  }
  started_ = true;
  std::promise<void> ready;
  auto ready_future = ready.get_future();
  thread_ = std::thread([this, &ready] {
    thread_id_ = std::this_thread::get_id();
    ready.set_value();
    loop();
  });
  ready_future.wait();
  return std::nullopt;
}

void ucx_core::stop() {
  if (!started_.exchange(false)) {
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
    worker_ = nullptr;
    context_ = nullptr;
    return;
  }
  if (on_thread()) {
    log_->critical("[ucx] the transport was destroyed from one of its own callbacks");
    std::abort();
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
  ::close(event_fd_);
  ::close(epoll_fd_);
}

void ucx_core::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    queue_.push_back(std::move(fn));
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof(one));
}

template <class F>
auto ucx_core::run_sync(F&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  if (on_thread()) return fn();
  auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
  auto future = task->get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return failed("transport is shut down");
    queue_.push_back([task] { (*task)(); });
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof(one));
  return future.get();
}

void ucx_core::loop() {
  bool stopping = false;
  while (true) {
    std::vector<std::function<void()>> tasks;
    {
      std::lock_guard lock(mutex_);
      tasks.swap(queue_);
      stopping = stopping_;
    }
    if (stopping) break;
    for (auto& t : tasks) t();
    while (ucp_worker_progress(worker_) != 0) {
    }
    while (!deferred_.empty()) {
      auto batch = std::move(deferred_);
      deferred_.clear();
      for (auto& d : batch) d();
      while (ucp_worker_progress(worker_) != 0) {
      }
    }
    check_deadlines();
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty() || stopping_) continue;
    }
    if (worker_fd_ >= 0) {
      ucs_status_t st = ucp_worker_arm(worker_);
      if (st == UCS_ERR_BUSY) continue;
    }
    epoll_event events[4];
    int timeout_ms = worker_fd_ >= 0 ? 20 : 1;
    int n = ::epoll_wait(epoll_fd_, events, 4, timeout_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == event_fd_) {
        std::uint64_t v;
        [[maybe_unused]] auto r = ::read(event_fd_, &v, sizeof(v));
      }
    }
  }
  // Shut down on this thread: fail every connection, close endpoints and listeners.
  std::vector<std::shared_ptr<ucx_connection>> conns;
  for (auto& [ep, c] : by_ep_) conns.push_back(c);
  for (auto& c : conns) {
    if (c->state_ == connection_state::open || c->state_ == connection_state::connecting) {
      c->state_ = connection_state::closed;
      c->error_ = transport_error{errc::closed, "transport shut down"};
    }
    release_held(c);
    // Handlers may hold their connection (decorators do): let go of them.
    c->handlers_ = {};
    c->on_accept_ = nullptr;
    close_conn(c, true);
  }
  for (auto& [id, l] : listeners_) ucp_listener_destroy(l->handle);
  listeners_.clear();
  auto until = clock_type::now() + std::chrono::seconds(2);
  while ((closing_ > 0 || !deferred_.empty()) && clock_type::now() < until) {
    ucp_worker_progress(worker_);
    auto batch = std::move(deferred_);
    deferred_.clear();
    for (auto& d : batch) d();
  }
  by_ep_.clear();
}

void ucx_core::check_deadlines() {
  auto now = clock_type::now();
  std::vector<std::shared_ptr<ucx_connection>> late;
  for (auto& [ep, c] : by_ep_)
    if (c->state_ == connection_state::connecting && now > c->deadline_) late.push_back(c);
  for (auto& c : late)
    fail(c, {errc::timed_out, "handshake with " + c->peer().remote.to_string() +
                                  " did not finish in " +
                                  std::to_string(opts_.common.connect_timeout_s) + " s"});
}

// ---------------------------------------------------------------- listen / connect

result<std::unique_ptr<listener>> ucx_core::listen(const address& where, accept_handler on_accept,
                                                   refusal_handler on_refused) {
  std::string why;
  auto sa = resolve(where, &why);
  if (!sa) return sailor::error{error_kind::invalid_input, why, "", 0, "address"};
  auto self = shared_from_this();
  return run_sync([&, self]() -> result<std::unique_ptr<listener>> {
    auto state = std::make_unique<listener_state>();
    state->id = next_id_++;
    state->on_accept = std::move(on_accept);
    state->on_refused = std::move(on_refused);
    state->core = this;
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*sa);
    lp.sockaddr.addrlen = sizeof(*sa);
    lp.conn_handler.cb = &ucx_core::conn_request_callback;
    lp.conn_handler.arg = state.get();
    ucs_status_t st = ucp_listener_create(worker_, &lp, &state->handle);
    if (st != UCS_OK) return failed("cannot listen on " + where.to_string() + ": " + status_text(st));
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    state->bound = where;
    if (ucp_listener_query(state->handle, &attr) == UCS_OK) {
      state->bound = from_sockaddr(attr.sockaddr);
      if (state->bound.host == "0.0.0.0" || state->bound.host.empty()) state->bound.host = where.host;
    }
    auto bound = state->bound;
    auto id = state->id;
    log_->debug("[ucx] listening on {}", bound.to_string());
    listeners_.emplace(id, std::move(state));
    return std::unique_ptr<listener>(new ucx_listener(weak_from_this(), id, bound));
  });
}

void ucx_core::close_listener(std::uint64_t id) {
  post([this, id] {
    auto it = listeners_.find(id);
    if (it == listeners_.end()) return;
    ucp_listener_destroy(it->second->handle);
    listeners_.erase(it);
  });
}

result<connection_ptr> ucx_core::connect(const address& to, connection_handlers handlers) {
  std::string why;
  auto sa = resolve(to, &why);
  if (!sa) return sailor::error{error_kind::invalid_input, why, "", 0, "address"};
  auto conn = std::make_shared<ucx_connection>(weak_from_this(), next_id_++, false);
  conn->handlers_ = std::move(handlers);
  conn->peer_.remote = to;
  conn->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                            opts_.common.connect_timeout_s * 1000));
  sockaddr_in addr = *sa;
  post([this, conn, addr] {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    p.sockaddr.addrlen = sizeof(addr);
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &ucx_core::ep_error_callback;
    p.err_handler.arg = conn.get();
    ucs_status_t st = ucp_ep_create(worker_, &p, &conn->ep_);
    if (st != UCS_OK) {
      conn->ep_ = nullptr;
      fail(conn, {errc::disconnected, "cannot connect to " + conn->peer_.remote.to_string() +
                                          ": " + status_text(st)});
      return;
    }
    by_ep_[conn->ep_] = conn;
    detail::hello h{opts_.common.announced_version, opts_.common.local_name,
                    opts_.common.local_zone};
    send(conn, am_hello, {}, detail::encode_hello(h), {}, nullptr, false);
  });
  return connection_ptr(conn);
}

void ucx_core::conn_request_callback(ucp_conn_request_h request, void* arg) {
  auto* state = static_cast<listener_state*>(arg);
  ucx_core* core = state->core;
  auto conn = std::make_shared<ucx_connection>(core->weak_from_this(), core->next_id_++, true);
  conn->on_accept_ = state->on_accept;
  conn->on_refused_ = state->on_refused;
  conn->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                            core->opts_.common.connect_timeout_s * 1000));
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(request, &attr) == UCS_OK)
    conn->peer_.remote = from_sockaddr(attr.client_address);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.conn_request = request;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &ucx_core::ep_error_callback;
  p.err_handler.arg = conn.get();
  ucs_status_t st = ucp_ep_create(core->worker_, &p, &conn->ep_);
  if (st != UCS_OK) {
    core->log_->warn("[ucx] refused a connection from {}: {}", conn->peer_.remote.to_string(),
                     status_text(st));
    if (state->on_refused)
      state->on_refused(conn->peer_.remote,
                        {errc::refused, std::string("endpoint not created: ") + status_text(st)});
    return;
  }
  core->by_ep_[conn->ep_] = conn;
}

// ---------------------------------------------------------------- handshake

void ucx_core::on_hello(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes) {
  if (!c->server_ || c->handshaken_) {
    fail(c, {errc::invalid_message, "unexpected hello"});
    return;
  }
  auto decoded = detail::decode_hello(bytes);
  std::optional<transport_error> refuse;
  detail::hello h;
  if (auto* err = std::get_if<transport_error>(&decoded)) {
    refuse = *err;
  } else {
    h = std::get<detail::hello>(decoded);
    refuse = detail::check_hello(h);
  }
  detail::hello_reply reply{!refuse, refuse ? refuse->message : "", protocol_version,
                            opts_.common.local_name, opts_.common.local_zone};
  if (refuse) {
    log_->warn("[ucx] refused peer {} ({}): {}", c->peer_.remote.to_string(), h.name,
               refuse->to_string());
    c->state_ = connection_state::failed;
    c->error_ = refuse;
    release_held(c);
    if (auto told = std::exchange(c->on_refused_, nullptr)) told(c->peer_.remote, *refuse);
    auto conn = c;
    send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {},
         [this, conn](const op_status&) { close_conn(conn, false); }, false);
    return;
  }
  {
    std::lock_guard lock(c->peer_mutex_);
    c->peer_.name = h.name;
    c->peer_.zone = h.zone;
  }
  c->handshaken_ = true;
  c->state_ = connection_state::open;
  send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {}, nullptr, false);
  log_->debug("[ucx] accepted {} from {}", h.name, c->peer_.remote.to_string());
  auto on_accept = std::move(c->on_accept_);
  c->on_accept_ = nullptr;
  if (on_accept) c->handlers_ = on_accept(c);
  replay_held(c);
}

void ucx_core::replay_held(const std::shared_ptr<ucx_connection>& c) {
  auto held = std::move(c->held_);
  c->held_.clear();
  for (auto& h : held)
    on_data(c, h.id, h.header, h.data, h.length, static_cast<data_kind>(h.kind));
  deliver(c);
}

void ucx_core::release_held(const std::shared_ptr<ucx_connection>& c) {
  for (auto& h : c->held_)
    if (static_cast<data_kind>(h.kind) != data_kind::transient)
      ucp_am_data_release(worker_, h.data);
  c->held_.clear();
}

void ucx_core::on_hello_reply(const std::shared_ptr<ucx_connection>& c,
                              std::span<const std::byte> bytes) {
  if (c->server_ || c->state_ != connection_state::connecting) return;
  auto decoded = detail::decode_hello_reply(bytes);
  if (auto* err = std::get_if<transport_error>(&decoded)) {
    fail(c, *err);
    return;
  }
  auto& r = std::get<detail::hello_reply>(decoded);
  if (!r.accepted) {
    errc code = r.version != opts_.common.announced_version ? errc::protocol_mismatch : errc::refused;
    fail(c, {code, "refused by " + c->peer().remote.to_string() + ": " + r.reason});
    return;
  }
  {
    std::lock_guard lock(c->peer_mutex_);
    c->peer_.name = r.name;
    c->peer_.zone = r.zone;
  }
  c->handshaken_ = true;
  c->state_ = connection_state::open;
  if (c->handlers_.on_open) c->handlers_.on_open();
  replay_held(c);
}

// ---------------------------------------------------------------- receive

ucs_status_t ucx_core::am_callback(void* arg, const void* header, size_t header_length,
                                   void* data, size_t length, const ucp_am_recv_param_t* param) {
  auto* a = static_cast<am_arg*>(arg);
  ucx_core* core = a->core;
  struct in_callback {
    ucx_core* core;
    explicit in_callback(ucx_core* c) : core(c) { core->on_callback_ = true; }
    ~in_callback() { core->on_callback_ = false; }
  } guard(core);
  bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
    core->log_->warn("[ucx] dropped an active message without reply endpoint");
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
  }
  auto it = core->by_ep_.find(param->reply_ep);
  if (it == core->by_ep_.end()) {
    core->log_->warn("[ucx] dropped active message {} from an unknown endpoint", a->id);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
  }
  auto conn = it->second;
  if (a->id == am_hello || a->id == am_hello_reply) {
    if (rndv) {
      core->deferred_.push_back([core, conn] {
        core->fail(conn, {errc::invalid_message, "oversized handshake"});
      });
      return UCS_ERR_REJECTED;
    }
    std::vector<std::byte> bytes(length);
    if (length) std::memcpy(bytes.data(), data, length);
    unsigned id = a->id;
    core->deferred_.push_back([core, conn, id, bytes = std::move(bytes)] {
      if (id == am_hello)
        core->on_hello(conn, bytes);
      else
        core->on_hello_reply(conn, bytes);
    });
    return UCS_OK;
  }
  return core->on_data(conn, a->id,
                       {static_cast<const std::byte*>(header), header ? header_length : 0}, data,
                       length,
                       rndv ? data_kind::rndv
                            : (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA ? data_kind::persistent
                                                                            : data_kind::transient));
}

ucs_status_t ucx_core::drop(void* data, data_kind kind) {
  // In the AM callback: REJECTED drops an rndv descriptor, OK releases eager data. In a
  // deferred call the return value is ignored, so release held data here.
  if (kind != data_kind::transient && !on_callback_) ucp_am_data_release(worker_, data);
  return kind == data_kind::rndv ? UCS_ERR_REJECTED : UCS_OK;
}

ucs_status_t ucx_core::on_data(const std::shared_ptr<ucx_connection>& c, unsigned id,
                               std::span<const std::byte> header, void* data, size_t length,
                               data_kind kind) {
  bool rndv = kind == data_kind::rndv;
  if (!c->handshaken_ && c->state_ == connection_state::connecting) {
    if (c->held_.size() >= 4096) {
      deferred_.push_back([this, c] {
        fail(c, {errc::invalid_message, "too many messages before the handshake"});
      });
      return drop(data, kind);
    }
    ucx_connection::held_message h{id, {header.begin(), header.end()}, data, length,
                                   static_cast<int>(kind), nullptr};
    if (kind == data_kind::transient) {
      h.copy = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(data),
                                                        static_cast<const std::byte*>(data) + length);
      h.data = h.copy->data();
      c->held_.push_back(std::move(h));
      return UCS_OK;
    }
    c->held_.push_back(std::move(h));
    return UCS_INPROGRESS;
  }
  // Messages of a connection that is not (or no longer) open are dropped.
  if (!c->handshaken_ || c->state_ == connection_state::failed ||
      c->state_ == connection_state::closed) {
    log_->warn("[ucx] connection {}: dropped a message received in state {}{}", c->id_,
               to_string(c->state_.load()), c->handshaken_ ? "" : " before the handshake");
    return drop(data, kind);
  }
  if (header.size() < sizeof(std::uint64_t)) {
    deferred_.push_back([this, c] { fail(c, {errc::invalid_message, "message without sequence number"}); });
    return drop(data, kind);
  }
  std::uint64_t seq;
  std::memcpy(&seq, header.data(), sizeof(seq));
  header = header.subspan(sizeof(seq));
  if (seq < c->deliver_seq_ || c->recvs_.count(seq)) {
    deferred_.push_back([this, c, seq] {
      fail(c, {errc::invalid_message, "duplicate sequence number " + std::to_string(seq)});
    });
    return drop(data, kind);
  }
  auto slot = std::make_unique<pending_recv>();
  std::byte* dest = nullptr;
  if (id == am_control) {
    slot->control.resize(length);
    dest = slot->control.data();
  } else {
    slot->tensor = true;
    auto decoded = decode_tensor_header(header);
    if (auto* err = std::get_if<transport_error>(&decoded)) {
      auto e = *err;
      deferred_.push_back([this, c, e] { fail(c, e); });
      return drop(data, kind);
    }
    slot->desc = std::move(std::get<tensor_descriptor>(decoded));
    if (slot->desc.bytes != length) {
      transport_error e{errc::invalid_message, "tensor header says " +
                                                   std::to_string(slot->desc.bytes) +
                                                   " bytes, payload has " + std::to_string(length)};
      deferred_.push_back([this, c, e] { fail(c, e); });
      return drop(data, kind);
    }
    if (c->handlers_.allocate) {
      slot->payload = c->handlers_.allocate(slot->desc);
      if (slot->payload.size() < length) {
        transport_error e{errc::invalid_argument, "allocate() gave " +
                                                      std::to_string(slot->payload.size()) +
                                                      " bytes for a payload of " +
                                                      std::to_string(length)};
        deferred_.push_back([this, c, e] { fail(c, e); });
        return drop(data, kind);
      }
    } else {
      slot->payload = payload_buffer::allocate(length);
    }
    dest = slot->payload.data();
  }
  pending_recv* raw = slot.get();
  c->recvs_.emplace(seq, std::move(slot));
  if (!rndv) {
    if (length) std::memcpy(dest, data, length);
    if (kind == data_kind::persistent && !on_callback_) ucp_am_data_release(worker_, data);
    raw->ready = true;
    deferred_.push_back([this, c] { deliver(c); });
    return UCS_OK;
  }
  auto* op = new recv_op{c, raw};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &ucx_core::recv_callback;
  p.user_data = op;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, data, dest, length, &p);
  if (req == nullptr) {
    recv_callback(nullptr, UCS_OK, length, op);
  } else if (UCS_PTR_IS_ERR(req)) {
    recv_callback(nullptr, UCS_PTR_STATUS(req), 0, op);
  }
  return UCS_INPROGRESS;
}

void ucx_core::recv_callback(void* request, ucs_status_t status, size_t, void* user_data) {
  std::unique_ptr<recv_op> op(static_cast<recv_op*>(user_data));
  auto core = op->conn->core_.lock();
  if (request) ucp_request_free(request);
  if (!core) return;
  auto c = op->conn;
  if (status != UCS_OK) {
    core->deferred_.push_back([core, c, status] {
      core->fail(c, {errc::disconnected, "receive from " + c->peer().remote.to_string() +
                                             " failed: " + status_text(status)});
    });
    return;
  }
  op->slot->ready = true;
  core->deferred_.push_back([core, c] { core->deliver(c); });
}

void ucx_core::deliver(const std::shared_ptr<ucx_connection>& c) {
  while (!c->recvs_.empty() && c->recvs_.begin()->first == c->deliver_seq_ &&
         c->recvs_.begin()->second->ready) {
    if (c->state_ != connection_state::open) {
      c->recvs_.clear();
      return;
    }
    auto slot = std::move(c->recvs_.begin()->second);
    c->recvs_.erase(c->recvs_.begin());
    ++c->deliver_seq_;
    if (slot->tensor) {
      if (c->handlers_.on_tensor) c->handlers_.on_tensor(std::move(slot->desc), std::move(slot->payload));
    } else {
      if (c->handlers_.on_control) c->handlers_.on_control(std::move(slot->control));
    }
  }
}

// ---------------------------------------------------------------- send

void ucx_core::send(const std::shared_ptr<ucx_connection>& c, unsigned id,
                    std::vector<std::byte> header, std::vector<std::byte> owned,
                    std::span<const std::byte> data, completion done, bool force_rndv) {
  bool handshake = id == am_hello || id == am_hello_reply;
  if (c->ep_ == nullptr || (!handshake && (c->state_ == connection_state::failed ||
                                          c->state_ == connection_state::closed))) {
    transport_error e = c->error_.value_or(transport_error{errc::closed, "connection closed"});
    detail::complete(done, e);
    return;
  }
  if (!handshake) {
    std::uint64_t seq = ++c->send_seq_;
    header.insert(header.begin(), reinterpret_cast<const std::byte*>(&seq),
                  reinterpret_cast<const std::byte*>(&seq) + sizeof(seq));
  }
  auto* op = new send_op{c, std::move(done), std::move(header), std::move(owned)};
  if (!op->owned.empty()) data = op->owned;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  if (force_rndv && opts_.rndv_threshold_bytes > 0 && data.size() >= opts_.rndv_threshold_bytes)
    p.flags |= UCP_AM_SEND_FLAG_RNDV;
  p.cb.send = &ucx_core::send_callback;
  p.user_data = op;
  ucs_status_ptr_t req =
      ucp_am_send_nbx(c->ep_, id, op->header.empty() ? nullptr : op->header.data(),
                      op->header.size(), data.empty() ? nullptr : data.data(), data.size(), &p);
  if (req == nullptr) {
    send_callback(nullptr, UCS_OK, op);
  } else if (UCS_PTR_IS_ERR(req)) {
    send_callback(nullptr, UCS_PTR_STATUS(req), op);
  }
}

void ucx_core::send_callback(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<send_op> op(static_cast<send_op*>(user_data));
  if (request) ucp_request_free(request);
  auto core = op->conn->core_.lock();
  op_status result;
  if (status != UCS_OK) {
    result = op->conn->error_.value_or(
        transport_error{status == UCS_ERR_CANCELED ? errc::closed : errc::disconnected,
                        "send to " + op->conn->peer().remote.to_string() +
                            " failed: " + status_text(status)});
  }
  if (!op->done) return;
  if (!core) {
    detail::complete(op->done, result);
    return;
  }
  auto done = std::move(op->done);
  core->deferred_.push_back([done = std::move(done), result]() mutable {
    detail::complete(done, result);
  });
}

// ---------------------------------------------------------------- failure and close

void ucx_core::ep_error_callback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* raw = static_cast<ucx_connection*>(arg);
  auto core = raw->core_.lock();
  if (!core) return;
  auto c = raw->shared_from_this();
  core->deferred_.push_back([core, c, status] {
    errc code = errc::disconnected;
    std::string what = c->state_ == connection_state::connecting && !c->server_
                           ? "cannot reach "
                           : "peer failed: ";
    core->fail(c, {code, what + c->peer().remote.to_string() + " (" + status_text(status) + ")"});
  });
}

void ucx_core::fail(const std::shared_ptr<ucx_connection>& c, transport_error err) {
  auto s = c->state_.load();
  if (s == connection_state::closed || s == connection_state::failed) {
    if (c->ep_) close_conn(c, true);
    return;
  }
  bool was_surfaced = !c->server_ || c->handshaken_;
  c->state_ = connection_state::failed;
  c->error_ = err;
  c->recvs_.clear();
  release_held(c);
  close_conn(c, true);
  if (was_surfaced) {
    log_->debug("[ucx] connection {} to {} failed: {}", c->id_, c->peer().remote.to_string(),
                err.to_string());
    auto on_error = std::move(c->handlers_.on_error);
    c->handlers_ = {};
    if (on_error) on_error(err);
  } else {
    log_->warn("[ucx] connection from {} failed before its handshake: {}",
               c->peer().remote.to_string(), err.to_string());
    if (auto told = std::exchange(c->on_refused_, nullptr)) told(c->peer().remote, err);
  }
}

void ucx_core::close_conn(const std::shared_ptr<ucx_connection>& c, bool force) {
  if (!c->ep_) return;
  ucp_ep_h ep = c->ep_;
  c->ep_ = nullptr;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                   UCP_OP_ATTR_FIELD_USER_DATA;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  auto* keep = new std::shared_ptr<ucx_connection>(c);
  p.cb.send = &ucx_core::close_callback;
  p.user_data = keep;
  ++closing_;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) close_callback(nullptr, UCS_OK, keep);
}

void ucx_core::close_callback(void* request, ucs_status_t, void* user_data) {
  std::unique_ptr<std::shared_ptr<ucx_connection>> keep(
      static_cast<std::shared_ptr<ucx_connection>*>(user_data));
  if (request) ucp_request_free(request);
  auto core = (*keep)->core_.lock();
  if (!core) return;
  --core->closing_;
  // The ep is gone: forget it (late callbacks of this ep find nothing).
  for (auto it = core->by_ep_.begin(); it != core->by_ep_.end(); ++it) {
    if (it->second == *keep) {
      core->by_ep_.erase(it);
      break;
    }
  }
}

// ---------------------------------------------------------------- connection methods

void ucx_connection::send_control(std::vector<std::byte> bytes, completion done) {
  auto core = core_.lock();
  if (!core) {
    detail::complete(done, transport_error{errc::closed, "transport is shut down"});
    return;
  }
  auto guard = std::make_shared<detail::completion_guard>(std::move(done));
  core->post([core, self = shared_from_this(), bytes = std::move(bytes), guard]() mutable {
    core->send(self, am_control, {}, std::move(bytes), {}, guard->take(), true);
  });
}

void ucx_connection::send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                                 completion done) {
  auto core = core_.lock();
  if (!core) {
    detail::complete(done, transport_error{errc::closed, "transport is shut down"});
    return;
  }
  desc.bytes = payload.size();
  auto guard = std::make_shared<detail::completion_guard>(std::move(done));
  core->post([core, self = shared_from_this(), header = encode_tensor_header(desc), payload,
              guard]() mutable {
    core->send(self, am_tensor, std::move(header), {}, payload, guard->take(), true);
  });
}

void ucx_connection::close() {
  auto core = core_.lock();
  if (!core) return;
  core->post([core, self = shared_from_this()] {
    auto s = self->state_.load();
    if (s == connection_state::closed || s == connection_state::failed) return;
    self->state_ = connection_state::closed;
    self->error_ = transport_error{errc::closed, "connection closed locally"};
    self->recvs_.clear();
    core->release_held(self);
    self->handlers_ = {};
    core->close_conn(self, false);
  });
}

}  // namespace

result<std::unique_ptr<transport>> make_ucx_transport(const ucx_options& options) {
  auto core = std::make_shared<ucx_core>(options);
  if (auto err = core->start()) return *err;
  return std::unique_ptr<transport>(new ucx_transport(std::move(core)));
}

}  // namespace sailor::comm
