// Framed links over stream sockets (TCP, AF_UNIX). One reader thread per link; writes are
// serialized by a mutex and done on the caller's thread.
#include "sailor/actors/link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "sailor/config/log.hpp"

namespace sailor::actors {
namespace {

// Every frame starts with this tag, so that bytes from something that is not a Sailor peer
// are recognised at once rather than read as a length.
constexpr std::uint32_t frame_magic = 0x534c5246;  // "SLRF"

sailor::error net_error(std::string message) {
  return sailor::error{error_kind::failed, std::move(message), "", 0, ""};
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes; false on EOF or error (`eof` tells which).
bool read_all(int fd, char* data, std::size_t size, bool& eof) {
  eof = false;
  while (size > 0) {
    auto n = ::recv(fd, data, size, 0);
    if (n == 0) {
      eof = true;
      return false;
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::uint32_t load_u32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}

void store_u32(char* p, std::uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
}

// Owns the descriptor; shared with the reader thread so that the descriptor outlives every
// read even when the link is destroyed on its own reader thread.
struct socket_holder {
  int fd;
  explicit socket_holder(int f) : fd(f) {}
  ~socket_holder() { ::close(fd); }
};

class stream_link final : public link, public std::enable_shared_from_this<stream_link> {
public:
  stream_link(int fd, std::string peer)
    : socket_(std::make_shared<socket_holder>(fd)), fd_(fd), peer_(std::move(peer)) {}

  ~stream_link() override {
    close("link destroyed");
    if (reader_.joinable()) {
      if (reader_.get_id() == std::this_thread::get_id())
        reader_.detach();
      else
        reader_.join();
    }
  }

  void start(link_handlers handlers) override {
    handlers_ = std::move(handlers);
    // The reader holds only a weak reference: the owner decides the link's lifetime.
    std::weak_ptr<stream_link> weak = shared_from_this();
    reader_ = std::thread([weak, socket = socket_] { read_loop(weak, socket->fd); });
  }

  bool send(const std::vector<char>& frame) override {
    if (closed_.load())
      return false;
    char header[8];
    store_u32(header, frame_magic);
    store_u32(header + 4, static_cast<std::uint32_t>(frame.size()));
    std::lock_guard<std::mutex> guard{write_mutex_};
    if (!write_all(fd_, header, sizeof(header)) || !write_all(fd_, frame.data(), frame.size())) {
      close(std::string("write failed: ") + std::strerror(errno));
      return false;
    }
    return true;
  }

  void close(const std::string& reason) override {
    if (closed_.exchange(true))
      return;
    ::shutdown(fd_, SHUT_RDWR);
    if (handlers_.on_closed)
      handlers_.on_closed(reason);
  }

  const std::string& peer() const override { return peer_; }

private:
  static void read_loop(std::weak_ptr<stream_link> weak, int fd) {
    std::string reason;
    for (;;) {
      char header[8];
      bool eof = false;
      if (!read_all(fd, header, sizeof(header), eof)) {
        reason = eof ? "peer closed the connection" : std::string("read failed: ") + std::strerror(errno);
        break;
      }
      auto magic = load_u32(header);
      auto size = load_u32(header + 4);
      if (magic != frame_magic) {
        reason = "garbage bytes (no frame tag): not a sailor peer";
        break;
      }
      if (size > max_frame_bytes) {
        reason = "frame of " + std::to_string(size) + " bytes exceeds the limit";
        break;
      }
      std::vector<char> frame(size);
      if (size > 0 && !read_all(fd, frame.data(), size, eof)) {
        reason = eof ? "peer closed the connection mid-frame" : "read failed mid-frame";
        break;
      }
      auto self = weak.lock();
      if (!self || self->closed_.load())
        return;
      if (self->handlers_.on_frame)
        self->handlers_.on_frame(std::move(frame));
    }
    if (auto self = weak.lock())
      self->close(reason);
  }

  std::shared_ptr<socket_holder> socket_;
  int fd_;
  std::string peer_;
  link_handlers handlers_;
  std::atomic<bool> closed_{false};
  std::mutex write_mutex_;
  std::thread reader_;
};

std::string describe(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

class tcp_listener final : public link_listener {
public:
  tcp_listener(int fd, std::uint16_t port, accept_handler on_accept)
    : fd_(fd), port_(port), on_accept_(std::move(on_accept)) {
    if (::pipe(wake_) != 0)
      wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { accept_loop(); });
  }

  ~tcp_listener() override {
    stop_.store(true);
    if (wake_[1] >= 0) {
      char c = 0;
      [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
    }
    thread_.join();
    ::close(fd_);
    if (wake_[0] >= 0) {
      ::close(wake_[0]);
      ::close(wake_[1]);
    }
  }

  std::uint16_t port() const override { return port_; }

private:
  void accept_loop() {
    while (!stop_.load()) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      auto n = ::poll(fds, wake_[0] >= 0 ? 2 : 1, 1000);
      if (n <= 0 || !(fds[0].revents & POLLIN))
        continue;
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int client = ::accept(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      if (client < 0)
        continue;
      int one = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      on_accept_(std::make_shared<stream_link>(client, describe(addr)));
    }
  }

  int fd_;
  std::uint16_t port_;
  accept_handler on_accept_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

result<addrinfo*> resolve(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive)
    hints.ai_flags = AI_PASSIVE;
  addrinfo* info = nullptr;
  auto service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &info);
  if (rc != 0 || !info)
    return net_error("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return info;
}

}  // namespace

result<std::unique_ptr<link_listener>> tcp_listen(const std::string& host, std::uint16_t port,
                                                  accept_handler on_accept) {
  auto info = resolve(host, port, true);
  if (!info)
    return info.error();
  std::string last = "no address";
  for (auto* a = *info; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    std::uint16_t actual = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    ::freeaddrinfo(*info);
    return std::unique_ptr<link_listener>(new tcp_listener(fd, actual, std::move(on_accept)));
  }
  ::freeaddrinfo(*info);
  return net_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + last);
}

result<std::shared_ptr<link>> tcp_connect(const std::string& host, std::uint16_t port,
                                          int timeout_ms) {
  auto info = resolve(host, port, false);
  if (!info)
    return info.error();
  std::string last = "no address";
  for (auto* a = *info; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    // Non-blocking connect so that the wait is bounded.
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
        errno = err;
        rc = -1;
      } else if (rc != 0) {
        errno = ETIMEDOUT;
      }
    }
    if (rc != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, flags);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(*info);
    return std::shared_ptr<link>(
      std::make_shared<stream_link>(fd, host + ":" + std::to_string(port)));
  }
  ::freeaddrinfo(*info);
  return net_error("cannot connect to " + host + ":" + std::to_string(port) + ": " + last);
}

std::pair<std::shared_ptr<link>, std::shared_ptr<link>> local_link_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    log::get("actors")->critical("socketpair failed: {}", std::strerror(errno));
    std::abort();
  }
  return {std::make_shared<stream_link>(fds[0], "local:a"),
          std::make_shared<stream_link>(fds[1], "local:b")};
}

result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    return sailor::error{error_kind::invalid_input,
                         "expected HOST:PORT, got '" + text + "'", "", 0, ""};
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    return sailor::error{error_kind::invalid_input,
                         "port must be a number in 0..65535, got '" + text.substr(colon + 1) + "'",
                         "", 0, ""};
  return std::pair{host, static_cast<std::uint16_t>(port)};
}

}  // namespace sailor::actors
