// The job token in the transport handshake, on every backend: a peer with the token is
// accepted and known by the name it proved; a wrong or missing token is refused on both
// sides with a reason; a message over its kind's limit closes that connection only.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sailor/comm/auth.hpp"
#include "sailor/protocol/codec.hpp"
#include "transport_harness.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_transport_auth {

using namespace sailor;
using namespace sailor::comm;
using sailor::test::client_events;
using sailor::test::event_box;
using sailor::test::wait_s;

namespace {

transport_options with_token(const std::string& name, const std::string& token) {
  transport_options o;
  o.local_name = name;
  o.local_zone = "zone-a";
  o.token = token;
  return o;
}

struct server_log {
  event_box box;
  std::vector<peer_info> accepted;
  std::vector<transport_error> refusals;
  std::vector<transport_error> errors;
  std::vector<std::vector<std::byte>> controls;
  std::unique_ptr<listener> lst;

  void listen(transport& t) {
    auto l = t.listen(
        address{"127.0.0.1", 0},
        [this](const connection_ptr& c) {
          box.update([&] { accepted.push_back(c->peer()); });
          connection_handlers h;
          h.on_control = [this](std::vector<std::byte> b) {
            box.update([&] { controls.push_back(std::move(b)); });
          };
          h.on_error = [this](const transport_error& e) { box.update([&] { errors.push_back(e); }); };
          return h;
        },
        [this](const address&, const transport_error& why) {
          box.update([&] { refusals.push_back(why); });
        });
    REQUIRE(l.ok());
    lst = std::move(*l);
  }
};

std::vector<std::byte> hello_message(const std::string& from) {
  return sailor::test::encode(from, protocol::shutdown_notice{"hello"});
}

}  // namespace

TEST_CASE("transport auth: the job token is proven both ways, a wrong or missing token is refused") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    server_log server;
    auto server_t = b.make(with_token("coordinator", "job-secret"));
    REQUIRE(server_t);
    server.listen(*server_t);
    auto where = server.lst->local_address();

    // The right token: accepted, and each side knows the other by the name it proved.
    client_events good, wrong, none;  // outlive the client transports that call them
    auto good_t = b.make(with_token("node-1", "job-secret"));
    auto conn = good_t->connect(where, good.handlers());
    REQUIRE(conn.ok());
    REQUIRE(good.outcome());
    CHECK((*conn)->peer().authenticated);
    CHECK((*conn)->peer().name == "coordinator");
    (*conn)->send_control(hello_message("node-1"), nullptr);
    REQUIRE(server.box.wait_for([&] { return server.controls.size() == 1; }, wait_s));
    {
      std::lock_guard lock(server.box.mutex());
      REQUIRE(server.accepted.size() == 1);
      CHECK(server.accepted[0].authenticated);
      CHECK(server.accepted[0].name == "node-1");
    }

    // Another token: the client finds the server cannot prove its own, and gives up.
    auto wrong_t = b.make(with_token("node-2", "guessed"));
    REQUIRE(wrong_t->connect(where, wrong.handlers()).ok());
    CHECK_FALSE(wrong.outcome());
    {
      std::lock_guard lock(wrong.box.mutex());
      REQUIRE(wrong.errors.size() == 1);
      CHECK(wrong.errors[0].code == errc::refused);
      CHECK(wrong.errors[0].message.find("did not prove the job token") != std::string::npos);
    }
    // No token: the server refuses with the reason.
    auto none_t = b.make(with_token("node-3", ""));
    REQUIRE(none_t->connect(where, none.handlers()).ok());
    CHECK_FALSE(none.outcome());
    {
      std::lock_guard lock(none.box.mutex());
      REQUIRE(none.errors.size() == 1);
      CHECK(none.errors[0].message.find("holds no job token") != std::string::npos);
    }
    // Neither reached the accept handler; both were told to the listener, the one of another
    // token (it hung up instead of proving it) as a failed authentication of the name it gave.
    CHECK(server.box.wait_for([&] { return server.refusals.size() >= 2; }, wait_s));
    std::lock_guard lock(server.box.mutex());
    CHECK(server.accepted.size() == 1);
    bool failed_authentication = false;
    for (const auto& r : server.refusals)
      failed_authentication = failed_authentication || (r.message.find("failed authentication") != std::string::npos &&
                                                        r.message.find("'node-2'") != std::string::npos);
    CHECK(failed_authentication);
  }
}

TEST_CASE("transport auth: a control message over the receiver's limit closes that connection only") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    server_log server;
    auto limited = with_token("coordinator", "job-secret");
    limited.max_control_bytes = 64 * 1024;
    auto server_t = b.make(limited);
    server.listen(*server_t);
    auto where = server.lst->local_address();
    client_events big, next;  // outlive the client transport that calls them
    auto client_t = b.make(with_token("node-1", "job-secret"));
    auto conn = client_t->connect(where, big.handlers());
    REQUIRE(big.outcome());
    (*conn)->send_control(std::vector<std::byte>(256 * 1024, std::byte{7}), nullptr);
    // The server drops that connection before taking the message; the client hears of it.
    CHECK(big.box.wait_for([&] { return !big.errors.empty(); }, wait_s));
    CHECK(server.box.wait_for([&] { return !server.errors.empty(); }, wait_s));
    // Another peer is still served.
    auto other = client_t->connect(where, next.handlers());
    REQUIRE(next.outcome());
    (*other)->send_control(hello_message("node-1"), nullptr);
    CHECK(server.box.wait_for([&] { return server.controls.size() == 1; }, wait_s));
  }
}

TEST_CASE("transport auth: names are printable UTF-8, tokens load from a file or the environment") {
  CHECK(is_printable_utf8("node-1 zone \xc3\xa9"));
  CHECK_FALSE(is_printable_utf8("n\xff\xfe"));
  CHECK_FALSE(is_printable_utf8("CPU\xc3\x28"));
  CHECK_FALSE(is_printable_utf8("a\nb"));
  CHECK_FALSE(is_printable_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_printable_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(is_printable_utf8("\xe2\x82"));          // cut short
  auto fresh = generate_job_token();
  CHECK(fresh.size() == 64);
  CHECK(fresh != generate_job_token());
  CHECK_FALSE(load_job_token("/nonexistent/token").ok());
}

TEST_CASE("transport auth: a receive handler that throws closes its connection only") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    auto server_t = b.make(with_token("coordinator", "job-secret"));
    event_box box;
    int received = 0;
    auto l = server_t->listen(address{"127.0.0.1", 0}, [&](const connection_ptr&) {
      connection_handlers h;
      h.on_control = [&](std::vector<std::byte> bytes) {
        if (bytes.size() == 3) throw std::runtime_error("a handler's bug");
        box.update([&] { ++received; });
      };
      return h;
    });
    REQUIRE(l.ok());
    auto where = (*l)->local_address();
    client_events first, second;  // outlive the client transport that calls them
    auto client_t = b.make(with_token("node-1", "job-secret"));
    auto conn = client_t->connect(where, first.handlers());
    REQUIRE(first.outcome());
    (*conn)->send_control(std::vector<std::byte>(3), nullptr);
    CHECK(first.box.wait_for([&] { return !first.errors.empty(); }, wait_s));
    auto other = client_t->connect(where, second.handlers());
    REQUIRE(second.outcome());
    (*other)->send_control(hello_message("node-1"), nullptr);
    CHECK(box.wait_for([&] { return received == 1; }, wait_s));
    server_t.reset();  // before the handlers' captures go
  }
}

// ---------------------------------------------------------------- TLS (TCP backend)

namespace {

// A TCP relay between a client and a server that records what the client sends, to look at
// the bytes on the wire. One connection; every wait bounded.
struct wire_tap {
  int listen_fd = -1;
  std::uint16_t port = 0;
  std::thread thread;
  std::mutex mutex;
  std::string seen;  // client -> server bytes

  explicit wire_tap(std::uint16_t server_port) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    REQUIRE(::listen(listen_fd, 1) == 0);
    socklen_t len = sizeof(sa);
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    thread = std::thread([this, server_port] { relay(server_port); });
  }
  ~wire_tap() {
    if (thread.joinable()) thread.join();
    ::close(listen_fd);
  }
  void relay(std::uint16_t server_port) {
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return;
    int client = ::accept(listen_fd, nullptr, nullptr);
    int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(server_port);
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (client < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    char buf[65536];
    while (std::chrono::steady_clock::now() < until) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 200) < 0) break;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          done = true;
          break;
        }
        if (i == 0) {
          std::lock_guard lock(mutex);
          seen.append(buf, static_cast<std::size_t>(n));
        }
        ::send(fds[1 - i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      }
      if (done) break;
    }
    ::close(client);
    ::close(server);
  }
};

// Sends one recognisable payload through a tap; returns what the tap saw.
std::string tapped_send(const sailor::test::backend& b) {
  server_log server;
  std::vector<std::vector<std::byte>> got;
  auto server_t = b.make(with_token("server", "job-secret"));
  server.listen(*server_t);
  wire_tap tap(server.lst->local_address().port);
  client_events client;
  auto client_t = b.make(with_token("node-1", "job-secret"));
  auto conn = client_t->connect(address{"127.0.0.1", tap.port}, client.handlers());
  REQUIRE(conn.ok());
  REQUIRE(client.outcome());
  std::string secret;
  // Under the 16 KiB a reason may hold (longer ones are cut by the sender).
  for (int i = 0; i < 900; ++i) secret += "SAILOR-PLAINTEXT-";
  auto bytes = protocol::encode(protocol::envelope{protocol::protocol_version, "node-1", "x", protocol::shutdown_notice{secret}});
  (*conn)->send_control(bytes, nullptr);
  REQUIRE(server.box.wait_for([&] { return server.controls.size() == 1; }, wait_s));
  {
    std::lock_guard lock(server.box.mutex());
    CHECK(server.controls[0] == bytes);
  }
  (*conn)->close();
  client_t.reset();
  server_t.reset();
  if (tap.thread.joinable()) tap.thread.join();
  std::lock_guard lock(tap.mutex);
  return tap.seen;
}

}  // namespace

TEST_CASE("transport TLS: bytes on the wire are encrypted, a peer without the job's CA or without TLS is refused") {
  REQUIRE_MESSAGE(!sailor::test::tls_files().dir.empty(),
                  "scripts/make-tls-certs.sh failed (is openssl installed?)");
  const auto backends = sailor::test::all_backends();
  const sailor::test::backend* plain = nullptr;
  const sailor::test::backend* tls = nullptr;
  for (const auto& b : backends) {
    if (b.name == "tcp") plain = &b;
    if (b.name == "tcp+tls") tls = &b;
  }
  REQUIRE(plain);
  REQUIRE(tls);
  // The tap sees the message in clear over plain TCP (so the check below can fail), and
  // nothing of it under TLS.
  CHECK(tapped_send(*plain).find("SAILOR-PLAINTEXT-") != std::string::npos);
  auto wire = tapped_send(*tls);
  CHECK(wire.size() > 900 * 17);  // the whole message went through the tap, encrypted
  CHECK(wire.find("SAILOR-PLAINTEXT-") == std::string::npos);

  server_log server;
  auto server_t = tls->make(with_token("server", "job-secret"));
  server.listen(*server_t);
  auto where = server.lst->local_address();
  // A certificate from another CA: refused in the TLS handshake, on both sides.
  auto stranger_opts = with_token("node-2", "job-secret");
  stranger_opts.tls = sailor::test::tls_files(true).as("stranger");
  stranger_opts.tls.ca = sailor::test::tls_files().dir + "/ca.pem";
  client_events stranger, clear;
  auto stranger_t = comm::make_tcp_transport(stranger_opts);
  REQUIRE(stranger_t.ok());
  REQUIRE((*stranger_t)->connect(where, stranger.handlers()).ok());
  CHECK_FALSE(stranger.outcome());
  // A peer without TLS: refused too.
  auto clear_t = plain->make(with_token("node-3", "job-secret"));
  REQUIRE(clear_t->connect(where, clear.handlers()).ok());
  CHECK_FALSE(clear.outcome());
  CHECK(server.box.wait_for([&] { return server.refusals.size() >= 2; }, wait_s));
  {
    std::lock_guard lock(server.box.mutex());
    CHECK(server.accepted.empty());
  }
  // Files that are missing or do not match are refused when the transport is made.
  auto bad = with_token("node-4", "job-secret");
  bad.tls = sailor::test::tls_files().as("client");
  bad.tls.key = sailor::test::tls_files().dir + "/server.key";
  auto mismatched = comm::make_tcp_transport(bad);
  REQUIRE_FALSE(mismatched.ok());
  CHECK(mismatched.error().message.find("server.key") != std::string::npos);
  CHECK(mismatched.error().field == "tls key");
  bad.tls.ca.clear();
  REQUIRE_FALSE(comm::make_tcp_transport(bad).ok());
}

}  // namespace integration_transport_auth
