#include "connection_base.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "auth.hpp"

namespace sailor::comm::detail {

namespace {

// Refuses the peer of a server connection at the door: logged once, the connection failed,
// the listener told. Returns the reply that says why.
hello_reply refuse_at_door(connection_base& c, const transport_error& why,
                           const transport_options& opts, spdlog::logger& log,
                           const char* backend, const std::string& claimed) {
  auto remote = c.peer().remote;
  log.warn("[{}] refused peer {} ({}): {}", backend, remote.to_string(),
           is_printable_utf8(claimed) && claimed.size() <= max_peer_name_bytes ? claimed
                                                                                : "<bad name>",
           why.to_string());
  c.state_ = connection_state::failed;
  c.error_ = why;
  c.awaiting_proof_ = false;
  if (auto told = std::exchange(c.on_refused_, nullptr))
    told(remote, why);
  return hello_reply{false, why.message, protocol_version, opts.local_name, opts.local_zone, {},
                     {}};
}

}  // namespace

hello make_hello(connection_base& c, const transport_options& opts) {
  hello h{opts.announced_version, opts.local_name, opts.local_zone, {}};
  if (!opts.token.empty()) {
    c.client_nonce_ = random_nonce();
    h.nonce = c.client_nonce_;
  }
  return h;
}

hello_reply answer_hello(connection_base& c, std::span<const std::byte> bytes,
                         const transport_options& opts, spdlog::logger& log,
                         const char* backend) {
  c.hello_seen_ = true;
  auto decoded = decode_hello(bytes);
  if (auto* err = std::get_if<transport_error>(&decoded))
    return refuse_at_door(c, *err, opts, log, backend, "");
  auto& h = std::get<hello>(decoded);
  if (auto refuse = check_hello(h, !opts.token.empty()))
    return refuse_at_door(c, *refuse, opts, log, backend, h.name);
  hello_reply reply{true, "", protocol_version, opts.local_name, opts.local_zone, {}, {}};
  if (opts.token.empty()) {
    c.set_identity(h.name, h.zone);
    c.handshaken_ = true;
    c.state_ = connection_state::open;
    log.debug("[{}] accepted {} from {}", backend, h.name, c.peer().remote.to_string());
    return reply;
  }
  // Challenge the client and prove the token first; accepted once its proof is in.
  c.client_nonce_ = h.nonce;
  c.server_nonce_ = random_nonce();
  reply.nonce = c.server_nonce_;
  reply.proof = handshake_proof(opts.token, proof_role::server, c.client_nonce_, c.server_nonce_,
                                h.name, h.zone, opts.local_name);
  c.claimed_ = std::move(h);
  c.awaiting_proof_ = true;
  return reply;
}

hello_reply take_proof(connection_base& c, std::span<const std::byte> proof,
                       const transport_options& opts, spdlog::logger& log, const char* backend) {
  const auto& h = c.claimed_;
  if (!c.awaiting_proof_)
    return refuse_at_door(c, {errc::invalid_message, "a proof of the token out of turn"}, opts,
                          log, backend, h.name);
  auto expected = handshake_proof(opts.token, proof_role::client, c.client_nonce_,
                                  c.server_nonce_, h.name, h.zone, opts.local_name);
  if (!proofs_match(expected, proof))
    return refuse_at_door(c, {errc::refused, "wrong job token"}, opts, log, backend, h.name);
  c.awaiting_proof_ = false;
  c.set_identity(h.name, h.zone, true);
  c.handshaken_ = true;
  c.state_ = connection_state::open;
  log.debug("[{}] accepted {} from {} (job token proven)", backend, h.name,
            c.peer().remote.to_string());
  return hello_reply{true, "", protocol_version, opts.local_name, opts.local_zone, {}, {}};
}

void admit(connection_base& c, const connection_ptr& self) {
  c.on_refused_ = nullptr;
  if (auto on_accept = std::exchange(c.on_accept_, nullptr))
    c.handlers_ = on_accept(self);
}

reply_outcome take_hello_reply(connection_base& c, std::span<const std::byte> bytes,
                               const transport_options& opts) {
  auto decoded = decode_hello_reply(bytes);
  if (auto* err = std::get_if<transport_error>(&decoded))
    return {*err, {}};
  auto& r = std::get<hello_reply>(decoded);
  auto who = c.peer().remote.to_string();
  if (!r.accepted) {
    errc code = r.version != opts.announced_version ? errc::protocol_mismatch : errc::refused;
    return {transport_error{code, "refused by " + who + ": " + r.reason}, {}};
  }
  if (r.name.size() > max_peer_name_bytes || !is_printable_utf8(r.name) ||
      r.zone.size() > max_peer_name_bytes || !is_printable_utf8(r.zone))
    return {transport_error{errc::invalid_message, who + " announced a name that is not "
                                                         "printable UTF-8"},
            {}};
  reply_outcome out;
  if (!opts.token.empty()) {
    auto expected = handshake_proof(opts.token, proof_role::server, c.client_nonce_, r.nonce,
                                    opts.local_name, opts.local_zone, r.name);
    if (r.nonce.size() != nonce_bytes || !proofs_match(expected, r.proof))
      return {transport_error{errc::refused, who + " did not prove the job token (" +
                                                 (r.proof.empty() ? "it holds none"
                                                                  : "another token") +
                                                 ")"},
              {}};
    out.proof = handshake_proof(opts.token, proof_role::client, c.client_nonce_, r.nonce,
                                opts.local_name, opts.local_zone, r.name);
  }
  c.set_identity(r.name, r.zone, !opts.token.empty());
  c.handshaken_ = true;
  c.state_ = connection_state::open;
  return out;
}

std::function<void(const transport_error&)> mark_failed(connection_base& c, transport_error err,
                                                        spdlog::logger& log,
                                                        const char* backend) {
  bool surfaced = !c.server_ || c.handshaken_;
  // The server proves the token first; a client of another job (or without a token) finds the
  // proof wrong and hangs up instead of proving its own: that close is a failed authentication.
  if (c.server_ && c.awaiting_proof_ && err.code == errc::disconnected) {
    const auto& name = c.claimed_.name;
    const bool printable = is_printable_utf8(name) && name.size() <= max_peer_name_bytes;
    err = transport_error{errc::refused, "failed authentication: the peer (announced as '" +
                                           (printable ? name : std::string{"<bad name>"}) +
                                           "') closed the connection instead of proving the job "
                                           "token (it holds another job's token, or none)"};
  }
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
