// The UCX backend: the worker and its progress thread, listeners and connects (see ucx_core.hpp).

#include "ucx_core.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "sailor/config/log.hpp"

namespace sailor::comm::ucx_backend {

using ucx_listener = detail::core_listener<ucx_core, std::uint64_t>;

// ---------------------------------------------------------------- core: life

// The UCX configuration entries to apply: the caller's, plus NET_DEVICES from the host's
// interface when nobody chose the devices.
static std::map<std::string, std::string> config_entries(const ucx_options& opts) {
  auto out = opts.ucx_config;
  const char* env = std::getenv("UCX_NET_DEVICES");
  if (!opts.host.empty() && !out.count("NET_DEVICES") && (!env || !*env)) {
    auto device = interface_holding(opts.host);
    if (!device.empty()) out["NET_DEVICES"] = device;
  }
  return out;
}

std::optional<sailor::error> ucx_core::start() {
  // A listener started again on its port (a coordinator restarted with the same command)
  // binds while the killed one's connections are in TIME_WAIT, as comm's TCP listener does.
  // UCX reads its connection managers' options from the environment only (ucp_config_modify
  // does not reach them); a value the user set is kept.
  ::setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return failed("ucp_config_read: " + status_text(st));
  for (const auto& [key, value] : config_entries(opts_)) {
    st = ucp_config_modify(config, key.c_str(), value.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return sailor::error::invalid_input(
        "ucx_config", "UCX option " + key + "=" + value + ": " + status_text(st));
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

  for (unsigned id = 0; id < am_count; ++id) {
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
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = tasks_.wake_fd();
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, tasks_.wake_fd(), &ev);
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
  tasks_.stop();
  if (thread_.joinable()) thread_.join();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
  ::close(epoll_fd_);
}

void ucx_core::post(std::function<void()> fn) { tasks_.post(std::move(fn)); }


void ucx_core::loop() {
  while (true) {
    bool stopping = false;
    auto tasks = tasks_.take(stopping);
    // What was asked before the stop is done first: a close asked for then flushes its
    // endpoint (the shut-down below would force it, dropping what UCX still holds).
    for (auto& t : tasks) guarded("a task", t);
    if (stopping) break;
    while (ucp_worker_progress(worker_) != 0) {
    }
    while (!deferred_.empty()) {
      auto batch = std::move(deferred_);
      deferred_.clear();
      for (auto& d : batch) guarded("a callback", d);
      while (ucp_worker_progress(worker_) != 0) {
      }
    }
    check_deadlines();
    if (tasks_.pending()) continue;
    if (worker_fd_ >= 0) {
      ucs_status_t st = ucp_worker_arm(worker_);
      if (st == UCS_ERR_BUSY) continue;
    }
    epoll_event events[4];
    int timeout_ms = worker_fd_ >= 0 ? 20 : 1;
    int n = ::epoll_wait(epoll_fd_, events, 4, timeout_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == tasks_.wake_fd()) tasks_.clear_wakeups();
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
    flush_queued(c);  // completes the user's queued sends: closed
    // Handlers may hold their connection (decorators do): let go of them.
    c->handlers_ = {};
    c->on_accept_ = nullptr;
    c->on_refused_ = nullptr;
    close_conn(c, true);
  }
  for (auto& [id, l] : listeners_) ucp_listener_destroy(l->handle);
  listeners_.clear();
  // A forced close ends UCX's sends from its progress queue: progress until they all ended.
  auto until = clock_type::now() + std::chrono::seconds(2);
  while ((closing_ > 0 || !deferred_.empty() || !sends_in_flight_.empty()) &&
         clock_type::now() < until) {
    ucp_worker_progress(worker_);
    auto batch = std::move(deferred_);
    deferred_.clear();
    for (auto& d : batch) d();
  }
  // What UCX did not end in time is completed here, once: its request is left to UCX.
  for (auto* op : sends_in_flight_)
    detail::complete(op->done, transport_error{errc::closed, "transport shut down"});
  loop_done_ = true;
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
  if (!sa)
    return sailor::error::invalid_input("address", why);
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
  if (!sa)
    return sailor::error::invalid_input("address", why);
  auto conn = std::make_shared<ucx_connection>(weak_from_this(), next_id_++, false);
  conn->handlers_ = std::move(handlers);
  conn->set_remote(to);
  conn->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                            opts_.common.connect_timeout_s * 1000));
  sockaddr_in addr = *sa;
  post([this, conn, addr, to] {
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
      fail(conn, {errc::disconnected, "cannot connect to " + to.to_string() +
                                          ": " + status_text(st)});
      return;
    }
    by_ep_[conn->ep_] = conn;
    send(conn, am_hello, {}, detail::encode_hello(detail::make_hello(*conn, opts_.common)), {},
         nullptr, false);
  });
  return connection_ptr(conn);
}

void ucx_core::conn_request_callback(ucp_conn_request_h request, void* arg) {
  auto* state = static_cast<listener_state*>(arg);
  ucx_core* core = state->core;
  // The cap on peers that have not finished their handshake.
  std::size_t waiting = 0;
  for (auto& [ep, c] : core->by_ep_)
    if (c->server_ && !c->handshaken_ && c->state_ == connection_state::connecting) ++waiting;
  if (waiting >= core->opts_.common.max_unauthenticated) {
    core->log_->warn("[ucx] {} peers are waiting for their handshake: rejected a new one",
                     waiting);
    ucp_listener_reject(state->handle, request);
    return;
  }
  auto conn = std::make_shared<ucx_connection>(core->weak_from_this(), core->next_id_++, true);
  conn->on_accept_ = state->on_accept;
  conn->on_refused_ = state->on_refused;
  conn->deadline_ = clock_type::now() + std::chrono::milliseconds(static_cast<long>(
                                            core->opts_.common.handshake_timeout_s * 1000));
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(request, &attr) == UCS_OK)
    conn->set_remote(from_sockaddr(attr.client_address));
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.conn_request = request;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &ucx_core::ep_error_callback;
  p.err_handler.arg = conn.get();
  ucs_status_t st = ucp_ep_create(core->worker_, &p, &conn->ep_);
  if (st != UCS_OK) {
    core->log_->warn("[ucx] refused a connection from {}: {}", conn->peer().remote.to_string(),
                     status_text(st));
    if (state->on_refused)
      state->on_refused(conn->peer().remote,
                        {errc::refused, std::string("endpoint not created: ") + status_text(st)});
    return;
  }
  core->by_ep_[conn->ep_] = conn;
}

}  // namespace sailor::comm::ucx_backend

namespace sailor::comm {

using ucx_backend::ucx_core;

std::string interface_holding(const std::string& host) {
  in_addr wanted{};
  if (::inet_pton(AF_INET, host.c_str(), &wanted) != 1) return {};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string out;
  for (auto* i = list; i && out.empty(); i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == wanted.s_addr)
      out = i->ifa_name;
  ::freeifaddrs(list);
  return out;
}

result<std::unique_ptr<transport>> make_ucx_transport(const ucx_options& options) {
  if (options.common.tls.enabled())
    return sailor::error::invalid_input(
      "--transport", "TLS is available over the tcp transport only (UCX does not encrypt)");
  auto core = std::make_shared<ucx_core>(options);
  if (auto err = core->start()) return *err;
  return std::unique_ptr<transport>(
    new detail::core_transport<ucx_core>(std::move(core), "ucx"));
}

}  // namespace sailor::comm
