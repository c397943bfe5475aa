#include "connection_base.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

namespace sailor::comm::detail {

hello_reply answer_hello(connection_base& c, std::span<const std::byte> bytes,
                         const transport_options& opts, spdlog::logger& log,
                         const char* backend) {
  auto decoded = decode_hello(bytes);
  std::optional<transport_error> refuse;
  hello h;
  if (auto* err = std::get_if<transport_error>(&decoded)) {
    refuse = *err;
  } else {
    h = std::get<hello>(decoded);
    refuse = check_hello(h);
  }
  hello_reply reply{!refuse, refuse ? refuse->message : "", protocol_version, opts.local_name,
                    opts.local_zone};
  auto remote = c.peer().remote;
  if (refuse) {
    log.warn("[{}] refused peer {} ({}): {}", backend, remote.to_string(), h.name,
             refuse->to_string());
    c.state_ = connection_state::failed;
    c.error_ = refuse;
    if (auto told = std::exchange(c.on_refused_, nullptr))
      told(remote, *refuse);
    return reply;
  }
  c.set_identity(h.name, h.zone);
  c.handshaken_ = true;
  c.state_ = connection_state::open;
  log.debug("[{}] accepted {} from {}", backend, h.name, remote.to_string());
  return reply;
}

void admit(connection_base& c, const connection_ptr& self) {
  c.on_refused_ = nullptr;
  if (auto on_accept = std::exchange(c.on_accept_, nullptr))
    c.handlers_ = on_accept(self);
}

std::optional<transport_error> take_hello_reply(connection_base& c,
                                                std::span<const std::byte> bytes,
                                                const transport_options& opts) {
  auto decoded = decode_hello_reply(bytes);
  if (auto* err = std::get_if<transport_error>(&decoded))
    return *err;
  auto& r = std::get<hello_reply>(decoded);
  if (!r.accepted) {
    errc code = r.version != opts.announced_version ? errc::protocol_mismatch : errc::refused;
    return transport_error{code, "refused by " + c.peer().remote.to_string() + ": " + r.reason};
  }
  c.set_identity(r.name, r.zone);
  c.handshaken_ = true;
  c.state_ = connection_state::open;
  return std::nullopt;
}

std::function<void(const transport_error&)> mark_failed(connection_base& c, transport_error err,
                                                        spdlog::logger& log,
                                                        const char* backend) {
  bool surfaced = !c.server_ || c.handshaken_;
  c.state_ = connection_state::failed;
  c.error_ = err;
  if (surfaced) {
    log.debug("[{}] connection {} to {} failed: {}", backend, c.id_,
              c.peer().remote.to_string(), err.to_string());
    auto on_error = std::move(c.handlers_.on_error);
    c.handlers_ = {};
    return on_error;
  }
  log.warn("[{}] connection from {} refused before its handshake: {}", backend,
           c.peer().remote.to_string(), err.to_string());
  if (auto told = std::exchange(c.on_refused_, nullptr))
    told(c.peer().remote, err);
  return nullptr;
}

task_queue::task_queue() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

task_queue::~task_queue() {
  if (fd_ >= 0) ::close(fd_);
}

bool task_queue::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    queue_.push_back(std::move(fn));
  }
  wake();
  return true;
}

std::vector<std::function<void()>> task_queue::take(bool& stopping) {
  std::lock_guard lock(mutex_);
  stopping = stopping_;
  return std::exchange(queue_, {});
}

bool task_queue::pending() const {
  std::lock_guard lock(mutex_);
  return stopping_ || !queue_.empty();
}

void task_queue::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
}

void task_queue::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd_, &one, sizeof(one));
}

void task_queue::clear_wakeups() {
  std::uint64_t v;
  [[maybe_unused]] auto n = ::read(fd_, &v, sizeof(v));
}

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

address from_sockaddr(const sockaddr_in& sa) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return address{buf, ntohs(sa.sin_port)};
}

address from_sockaddr(const sockaddr_storage& ss) {
  if (ss.ss_family != AF_INET)
    return address{"", 0};
  return from_sockaddr(*reinterpret_cast<const sockaddr_in*>(&ss));
}

}  // namespace sailor::comm::detail
