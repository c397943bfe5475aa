// Conformance suite of the transport interface, run against every backend (UCX, TCP and
// UCX behind the link shaper): ordering, payload sizes with contents checked, handshake
// refusals, garbage on the listening port, and no callback firing twice. A peer process
// killed mid-transfer is in transport_processes.test.cpp, the link shaper and the probe in
// transport_shaping.test.cpp, the helpers in transport_harness.hpp. Every wait is bounded.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "sailor/comm/link_probe.hpp"
#include "sailor/protocol/codec.hpp"
#include "transport_harness.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_transport {

using namespace sailor;
using namespace sailor::comm;
using namespace sailor::test;

TEST_CASE("transport conformance: messages arrive in order, each completion fires once") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    // Handler targets first: the transports (declared after) are destroyed before them.
    recording_server server;
    client_events ev;
    auto server_t = b.make(opts("server"));
    auto client_t = b.make(opts("client", "zone-b"));
    REQUIRE(server_t);
    REQUIRE(client_t);
    server.listen(*server_t);
    auto conn = client_t->connect(server.lst->local_address(), ev.handlers());
    REQUIRE(conn.ok());
    // Mixed controls and tensors, small and rendezvous-sized, issued before the handshake ends.
    constexpr int n = 300;
    std::vector<std::vector<std::byte>> payloads;
    for (int i = 0; i < n; ++i) payloads.push_back(patterned(i % 10 == 3 ? 300000 : i * 7, i));
    completions done;
    for (int i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        (*conn)->send_control(encode("client", protocol::heartbeat{"client", static_cast<std::uint64_t>(i)}),
                              done.make(i));
      } else {
        tensor_descriptor d{dtype::u8, {static_cast<std::int64_t>(payloads[i].size())},
                            static_cast<std::uint64_t>(i), "t", 0};
        (*conn)->send_tensor(d, payloads[i], done.make(i));
      }
    }
    REQUIRE(done.all_done(n));
    CHECK(done.failures() == 0);
    REQUIRE(server.box.wait_for([&] { return server.items.size() >= n; }, wait_s));
    CHECK(ev.box.wait_for([&] { return ev.opened; }, wait_s));
    {
      std::lock_guard lock(server.box.mutex());
      REQUIRE(server.items.size() == n);
      for (int i = 0; i < n; ++i) {
        CAPTURE(i);
        const auto& it = server.items[i];
        REQUIRE(it.tensor == (i % 2 == 1));
        if (it.tensor) {
          CHECK(it.desc.tag == static_cast<std::uint64_t>(i));
          CHECK(it.desc.bytes == payloads[i].size());
          CHECK(it.payload.size() == payloads[i].size());
          CHECK(matches(it.payload.bytes(), i));
        } else {
          auto e = decode(it.control);
          REQUIRE(e.has_value());
          CHECK(std::get<protocol::heartbeat>(e->body).seq == static_cast<std::uint64_t>(i));
        }
      }
      REQUIRE(server.accepted.size() == 1);
      CHECK(server.accepted[0]->peer().name == "client");
      CHECK(server.accepted[0]->peer().zone == "zone-b");
    }
    CHECK((*conn)->peer().name == "server");
    CHECK((*conn)->state() == connection_state::open);
    // Replies go the other way on the accepted connection.
    client_events back;
    (void)back;
    // Close: later sends complete once with errc::closed; nothing fired twice.
    (*conn)->close();
    completions after;
    (*conn)->send_control(encode("client", protocol::shutdown_notice{"bye"}), after.make(0));
    REQUIRE(after.all_done(1));
    {
      std::lock_guard lock(after.box.mutex());
      REQUIRE(after.outcome[0].has_value());
      CHECK(after.outcome[0]->code == errc::closed);
    }
    CHECK(done.max_calls() == 1);
    CHECK(after.max_calls() == 1);
    CHECK((*conn)->state() == connection_state::closed);
    std::lock_guard lock(ev.box.mutex());
    CHECK(ev.errors.empty());  // close() is quiet
  }
}

TEST_CASE("transport conformance: payloads from 0 bytes to 256 MiB arrive intact") {
  const std::vector<std::size_t> sizes = {0, 1, 8, 4095, 65535, 65536, (1u << 20) + 3,
                                          16u << 20, 256u << 20};
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    recording_server server;
    client_events ev;
    auto server_t = b.make(opts("server"));
    auto client_t = b.make(opts("client"));
    server.listen(*server_t);
    auto conn = client_t->connect(server.lst->local_address(), ev.handlers());
    REQUIRE(conn.ok());
    std::size_t received = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      CAPTURE(sizes[k]);
      auto payload = patterned(sizes[k], k + 1);
      completions done;
      tensor_descriptor d{dtype::f32, {static_cast<std::int64_t>(sizes[k] / 4)}, k, "big", 0};
      (*conn)->send_tensor(d, payload, done.make(0));
      REQUIRE(done.all_done(1));
      CHECK_FALSE(done.outcome[0].has_value());
      REQUIRE(server.box.wait_for([&] { return server.items.size() > received; }, 60));
      std::lock_guard lock(server.box.mutex());
      auto& it = server.items[received];
      CHECK(it.tensor);
      CHECK(it.desc.bytes == sizes[k]);
      CHECK(it.desc.shape == d.shape);
      CHECK(it.desc.type == dtype::f32);
      REQUIRE(it.payload.size() == sizes[k]);
      CHECK(matches(it.payload.bytes(), k + 1));
      server.items[received].payload = {};  // free the memory as we go
      ++received;
    }
  }
}

TEST_CASE("transport conformance: a receiver's allocator chooses where payloads land") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    std::vector<std::byte> arena(3 << 20);
    event_box box;
    std::vector<std::pair<std::byte*, std::size_t>> landed;
    auto server_t = b.make(opts("server"));
    auto client_t = b.make(opts("client"));
    auto l = server_t->listen(address{"127.0.0.1", 0}, [&](const connection_ptr&) {
      connection_handlers h;
      h.allocate = [&](const tensor_descriptor& d) {
        return payload_buffer(arena.data() + d.tag * (1 << 20), d.bytes, nullptr);
      };
      h.on_tensor = [&](tensor_descriptor, payload_buffer p) {
        box.update([&] { landed.emplace_back(p.data(), p.size()); });
      };
      return h;
    });
    REQUIRE(l.ok());
    // Sent once the connection is open (what the data plane's channel does); sends before
    // the handshake ends have their own test below.
    bool opened = false;
    connection_handlers client_handlers;
    client_handlers.on_open = [&] { box.update([&] { opened = true; }); };
    auto conn = client_t->connect((*l)->local_address(), client_handlers);
    REQUIRE(conn.ok());
    REQUIRE(box.wait_for([&] { return opened; }, wait_s));
    auto small = patterned(1000, 5);
    auto large = patterned(1 << 20, 6);
    completions done;  // the payloads must outlive their sends
    (*conn)->send_tensor({dtype::u8, {1000}, 0, "", 0}, small, done.make(0));
    (*conn)->send_tensor({dtype::u8, {1 << 20}, 2, "", 0}, large, done.make(1));
    REQUIRE(done.all_done(2));
    REQUIRE(box.wait_for([&] { return landed.size() == 2; }, wait_s));
    CHECK(landed[0].first == arena.data());
    CHECK(landed[1].first == arena.data() + (2 << 20));
    CHECK(matches({arena.data(), 1000}, 5));
    CHECK(matches({arena.data() + (2 << 20), 1 << 20}, 6));
  }
}

// Sends issued right after connect(), before the handshake ended, must arrive, with and
// without a job token, including a 1 MiB eager payload (over UCX they once overran what a
// server holds before the handshake and the connection failed, 1 run in 2 under load). Many
// rounds, because the race is between the handshake and the first data. A client with the
// wrong token gets every such send completed with an error instead.
TEST_CASE("transport conformance: sends issued before the handshake ends arrive, with and without a token") {
  for (const auto& b : sailor::test::all_backends()) {
    for (std::string token : {"", "job-secret"}) {
      CAPTURE(b.name);
      CAPTURE(token);
      for (int round = 0; round < 5; ++round) {
        auto server_opts = opts("server");
        auto client_opts = opts("client");
        server_opts.token = client_opts.token = token;
        client_and_server pair{b, server_opts, client_opts};
        auto& server = pair.server;
        auto small = patterned(1000, 5);
        auto large = patterned(1 << 20, 6);
        completions done;
        pair.conn->send_tensor({dtype::u8, {1000}, 0, "", 0}, small, done.make(0));
        pair.conn->send_tensor({dtype::u8, {1 << 20}, 1, "", 0}, large, done.make(1));
        pair.conn->send_control(encode("client", protocol::shutdown_notice{"after"}), done.make(2));
        REQUIRE(done.all_done(3));
        CHECK(done.failures() == 0);
        REQUIRE(server.box.wait_for([&] { return server.items.size() == 3; }, wait_s));
        std::lock_guard lock(server.box.mutex());
        CHECK(matches(server.items[0].payload.bytes(), 5));
        CHECK(matches(server.items[1].payload.bytes(), 6));
        CHECK(!server.items[2].tensor);
        CHECK(server.errors.empty());
      }
    }
    // The wrong token: refused, and the sends queued meanwhile complete with an error.
    auto server_opts = opts("server");
    auto client_opts = opts("client");
    server_opts.token = "job-secret";
    client_opts.token = "another-secret";
    client_and_server pair{b, server_opts, client_opts};
    auto& server = pair.server;
    auto& ev = pair.ev;
    auto small = patterned(1000, 5);
    completions done;
    pair.conn->send_tensor({dtype::u8, {1000}, 0, "", 0}, small, done.make(0));
    REQUIRE(done.all_done(1));
    CHECK(done.failures() == 1);
    REQUIRE(ev.box.wait_for([&] { return !ev.errors.empty(); }, wait_s));
    CHECK_FALSE(ev.opened);
    std::lock_guard lock(server.box.mutex());
    CHECK(server.items.empty());
  }
}

TEST_CASE("transport conformance: wrong protocol version and garbage are refused, listener keeps serving") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    recording_server server;
    client_events old_ev;
    client_events ev;
    auto server_t = b.make(opts("server"));
    server.listen(*server_t);
    auto where = server.lst->local_address();

    // Garbage bytes straight onto the listening port, a few times.
    for (int round = 0; round < 3; ++round) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      REQUIRE(fd >= 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(where.port);
      ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
      REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
      std::mt19937 rng(round);
      std::vector<unsigned char> junk(4096 << round);
      for (auto& c : junk) c = static_cast<unsigned char>(rng());
      [[maybe_unused]] auto n = ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
      ::close(fd);
    }

    // A peer with another protocol version gets a clear refusal.
    auto old_opts = opts("old-peer");
    old_opts.announced_version = protocol_version + 41;
    auto old_t = b.make(old_opts);
    auto old_conn = old_t->connect(where, old_ev.handlers());
    REQUIRE(old_conn.ok());
    REQUIRE(old_ev.box.wait_for([&] { return !old_ev.errors.empty(); }, wait_s));
    {
      std::lock_guard lock(old_ev.box.mutex());
      CHECK(old_ev.errors.size() == 1);
      CHECK(old_ev.errors[0].code == errc::protocol_mismatch);
      CHECK(old_ev.errors[0].message.find("version") != std::string::npos);
      CHECK_FALSE(old_ev.opened);
    }
    CHECK((*old_conn)->state() == connection_state::failed);
    // The listener's owner is told who was refused and why.
    auto version_refused = [&] {
      for (auto& [peer, why] : server.refusals)
        if (why.code == errc::protocol_mismatch) return true;
      return false;
    };
    REQUIRE(server.box.wait_for(version_refused, wait_s));
    {
      std::lock_guard lock(server.box.mutex());
      for (auto& [peer, why] : server.refusals) {
        CHECK(peer.host == "127.0.0.1");
        CHECK(peer.port != 0);
        if (why.code == errc::protocol_mismatch)
          CHECK(why.message.find(std::to_string(protocol_version + 41)) != std::string::npos);
      }
    }
    // Over TCP each garbage connection reaches the transport and is refused at the door too.
    // (Over UCX the bytes go to UCX's own connection manager, which never makes them a
    // connection request.)
    if (b.name == "tcp")
      CHECK(server.box.wait_for([&] { return server.refusals.size() >= 4; }, wait_s));

    // A good peer is still served.
    auto client_t = b.make(opts("client"));
    auto conn = client_t->connect(where, ev.handlers());
    REQUIRE(conn.ok());
    (*conn)->send_control(encode("client", protocol::shutdown_notice{"hello after garbage"}), nullptr);
    REQUIRE(server.box.wait_for([&] { return server.items.size() == 1; }, wait_s));
    std::lock_guard lock(server.box.mutex());
    CHECK(server.accepted.size() == 1);  // the refused peer never reached on_accept
    auto e = decode(server.items[0].control);
    REQUIRE(e.has_value());
    CHECK(std::get<protocol::shutdown_notice>(e->body).reason == "hello after garbage");
  }
}

TEST_CASE("transport conformance: connecting to a port nobody listens on fails once") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    // Find a free port by binding and closing a socket.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    ::close(fd);
    auto client_opts = opts("client");
    client_opts.connect_timeout_s = 5;
    client_events ev;
    auto client_t = b.make(client_opts);
    auto conn = client_t->connect(address{"127.0.0.1", ntohs(sa.sin_port)}, ev.handlers());
    REQUIRE(conn.ok());
    completions done;
    (*conn)->send_control(encode("client", protocol::shutdown_notice{"x"}), done.make(0));
    REQUIRE(ev.box.wait_for([&] { return !ev.errors.empty(); }, wait_s));
    REQUIRE(done.all_done(1));
    CHECK(done.outcome[0].has_value());
    std::this_thread::yield();
    std::lock_guard lock(ev.box.mutex());
    CHECK(ev.errors.size() == 1);
    CHECK((ev.errors[0].code == errc::disconnected || ev.errors[0].code == errc::timed_out));
    CHECK((*conn)->state() == connection_state::failed);
  }
  CHECK_FALSE(address::parse("no-port").ok());
}

// ---------------------------------------------------------------- peer processes

TEST_CASE("transport conformance: destroying a transport completes every pending send once") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    recording_server server;
    completions done;
    completions later;
    auto payload = patterned(1 << 20, 4);
    auto server_t = b.make(opts("server"));
    auto client_t = b.make(opts("client"));
    server.listen(*server_t);
    auto conn = client_t->connect(server.lst->local_address(), {});
    REQUIRE(conn.ok());
    constexpr int n = 50;
    for (int i = 0; i < n; ++i)
      (*conn)->send_tensor({dtype::u8, {1 << 20}, 0, "", 0}, payload, done.make(i));
    // The server accepts before the client goes: UCX 1.13 frees a listener while a connection
    // request it has taken from the socket may still be delivered to it (a crash in
    // ucp_cm_server_conn_request_cb when the server is destroyed a moment later, under load).
    REQUIRE(server.box.wait_for([&] { return !server.accepted.empty(); }, wait_s));
    client_t.reset();
    REQUIRE(done.all_done(n));
    // The connection outlives its transport: sends now fail at once, and only once.
    (*conn)->send_control(encode("client", protocol::shutdown_notice{"late"}), later.make(0));
    REQUIRE(later.all_done(1));
    CHECK(later.outcome[0].has_value());
    CHECK(later.outcome[0]->code == errc::closed);
    CHECK(done.max_calls() == 1);
    CHECK(later.max_calls() == 1);
    CHECK((*conn)->state() != connection_state::open);
  }
}

}  // namespace integration_transport
