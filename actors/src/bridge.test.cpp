// The bridge between two actor systems in this process, over a link pair: delivery by
// name, replies to the remote sender, down messages when the link closes, refusals.
#include "sailor/actors/bridge.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/wire.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/limits.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

// Answers every status request with a status whose plan_version is the request's number + 1,
// to whoever sent it. (Both travel as Cap'n Proto envelopes naming their destination.)
caf::behavior echo(caf::event_based_actor* self) {
  return {
    [self](const status_request& x) {
      cluster_status reply;
      reply.phase = "echo";
      reply.plan_version = x.unused + 1;
      self->send(caf::actor_cast<caf::actor>(self->current_sender()), reply);
    },
  };
}

struct two_processes {
  runtime_config cfg_a;
  runtime_config cfg_b;
  caf::actor_system a{cfg_a};
  caf::actor_system b{cfg_b};
};

// Joins `server` and `client` by a fresh link pair: the client's peer id of the server.
peer_id link_bridges(bridge& server, bridge& client) {
  auto [left, right] = local_link_pair();
  server.adopt(left);
  return client.adopt(right);
}

// Process a publishes the echo actor on its bridge, linked to process b's; `self` is an actor
// of b.
struct echo_linked : two_processes {
  bridge server{a};
  bridge client{b};
  peer_id peer = 0;  // the server, as the client knows it
  caf::scoped_actor self{b};
  echo_linked() {
    server.publish("echo", a.spawn(echo));
    peer = link_bridges(server, client);
  }
};

}  // namespace

TEST_CASE_FIXTURE(echo_linked, "bridge: a message reaches a named actor and the reply comes back") {
  client.publish("tester", caf::actor_cast<caf::actor>(self));
  auto remote_echo = client.remote_actor(peer, "echo");
  self->send(remote_echo, status_request{41});
  bool got = false;
  self->receive(
    [&](const cluster_status& x) {
      got = true;
      CHECK(x.phase == "echo");
      CHECK(x.plan_version == 42);
    },
    caf::after(5s) >> [] {});
  CHECK(got);
  CHECK(server.open_peers() == 1);
}

TEST_CASE_FIXTURE(echo_linked, "bridge: a closed link is a down message to monitors") {
  auto remote_echo = client.remote_actor(peer, "echo");
  self->monitor(remote_echo);
  server.close();  // the other process goes away
  bool down = false;
  self->receive(
    [&](const caf::down_msg& msg) {
      down = true;
      CHECK(msg.source == remote_echo.address());
      CHECK(msg.reason == caf::exit_reason::remote_link_unreachable);
    },
    caf::after(5s) >> [] {});
  CHECK(down);
  // A proxy made after the link died is down at once.
  auto late = client.remote_actor(peer, "other");
  self->monitor(late);
  bool late_down = false;
  self->receive([&](const caf::down_msg&) { late_down = true; }, caf::after(5s) >> [] {});
  CHECK(late_down);
}

TEST_CASE_FIXTURE(two_processes, "bridge: garbage and other protocol versions are refused") {
  bridge server{a};
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<peer_refused> refused;
  server.on_refused([&](const peer_refused& x) {
    std::lock_guard<std::mutex> guard{mutex};
    refused.push_back(x);
    changed.notify_all();
  });
  server.publish("echo", a.spawn(echo));
  auto wait_for = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock{mutex};
    return changed.wait_for(lock, 5s, [&] { return refused.size() >= n; });
  };
  SUBCASE("a frame of protocol version 99") {
    auto [left, right] = local_link_pair();
    server.adopt(left);
    std::mutex reply_mutex;
    std::condition_variable reply_changed;
    std::vector<std::vector<char>> replies;
    right->start(link_handlers{[&](std::vector<char>&& frame) {
                                 std::lock_guard<std::mutex> guard{reply_mutex};
                                 replies.push_back(std::move(frame));
                                 reply_changed.notify_all();
                               },
                               [](const std::string&) {}});
    right->send(*encode_envelope_as_version(99, "agent", "supervisor", caf::make_message(join_request{99, {}})));
    REQUIRE(wait_for(1));
    CHECK(refused[0].reason.find("protocol version 99") != std::string::npos);
    // The peer is told why, in a frame it can decode when it speaks our version.
    std::unique_lock<std::mutex> lock{reply_mutex};
    REQUIRE(reply_changed.wait_for(lock, 5s, [&] { return !replies.empty(); }));
    auto reply = decode_envelope(a, replies[0]);
    REQUIRE(reply.ok());
    REQUIRE(reply->body.match_elements<join_refused>());
    CHECK(reply->body.get_as<join_refused>(0).reason.find("protocol version 99") !=
          std::string::npos);
    CHECK(reply->body.get_as<join_refused>(0).code == refuse_reason::protocol_version);
  }
  SUBCASE("bytes that are not frames, on a TCP port") {
    auto port = server.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(*port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    // Longer than a frame header, so that the transport reads one and refuses it at once.
    const char garbage[] = "GET / HTTP/1.1\r\nHost: sailor\r\n\r\n";
    REQUIRE(::send(fd, garbage, sizeof(garbage) - 1, 0) > 0);
    REQUIRE(wait_for(1));
    CHECK(refused[0].reason.find("garbage") != std::string::npos);
    ::close(fd);
  }
  SUBCASE("a frame whose envelope does not decode") {
    auto [left, right] = local_link_pair();
    server.adopt(left);
    right->start(link_handlers{});
    right->send(std::vector<char>{'G', 'E', 'T', ' ', '/'});
    REQUIRE(wait_for(1));
    CHECK_FALSE(refused[0].reason.empty());
  }
  SUBCASE("a heartbeat over its kind's ceiling, far under the frame limit") {
    auto [left, right] = local_link_pair();
    server.adopt(left);
    bool closed = false;
    right->start(link_handlers{[](std::vector<char>&&) {}, [&](const std::string&) {
                                 std::lock_guard<std::mutex> guard{mutex};
                                 closed = true;
                                 changed.notify_all();
                               }});
    auto frame = encode_envelope(b, "agent", "echo", caf::make_message(heartbeat{std::string(64 * 1024, 'n'), 1}));
    REQUIRE(frame.ok());
    right->send(*frame);
    REQUIRE(wait_for(1));
    const auto limit = sailor::protocol::max_encoded_bytes(sailor::protocol::message{heartbeat{}}.index());
    CHECK(refused[0].reason == "a heartbeat of " + std::to_string(frame->size()) +
                                 " bytes, over its limit of " + std::to_string(limit) + " bytes");
    // That link is closed; the server goes on serving others (below).
    std::unique_lock<std::mutex> lock{mutex};
    CHECK(changed.wait_for(lock, 5s, [&] { return closed; }));
  }
  // The control frame limit comm's transports apply by default is the protocol's.
  CHECK(sailor::comm::transport_options{}.max_control_bytes ==
        sailor::protocol::wire_bounds::control_frame_bytes);
  // The server still serves well-formed peers.
  bridge client{b};
  auto peer = link_bridges(server, client);
  caf::scoped_actor self{b};
  client.publish("tester", caf::actor_cast<caf::actor>(self));
  self->send(client.remote_actor(peer, "echo"), status_request{1});
  bool got = false;
  self->receive([&](const cluster_status&) { got = true; }, caf::after(5s) >> [] {});
  CHECK(got);
}

#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"

namespace {

std::unique_ptr<sailor::comm::transport> make_comm(const std::string& kind, const std::string& name) {
  sailor::comm::transport_options common;
  common.local_name = name;
  if (kind == "ucx") {
    sailor::comm::ucx_options options;
    options.common = common;
    options.ucx_config["NET_DEVICES"] = "lo";
    options.ucx_config["TLS"] = "tcp,sm,self";
    auto t = sailor::comm::make_ucx_transport(options);
    return t ? std::move(*t) : nullptr;
  }
  auto t = sailor::comm::make_tcp_transport(common);
  return t ? std::move(*t) : nullptr;
}

// Both processes with a comm transport of one kind, which each test's subcases pick ("ucx",
// "tcp") through `open`. Bridges over them must be gone before the transports are.
struct two_transports : two_processes {
  std::unique_ptr<sailor::comm::transport> transport_a;  // process a's: the server's
  std::unique_ptr<sailor::comm::transport> transport_b;  // process b's: the client's
  void open(const std::string& kind) {
    transport_a = make_comm(kind, "server");
    transport_b = make_comm(kind, "client");
    REQUIRE(transport_a);
    REQUIRE(transport_b);
  }
};

// `server` listens on loopback and `client` connects to it: the client's peer id of the server.
peer_id connect_bridges(bridge& server, bridge& client) {
  auto port = server.listen("127.0.0.1", 0);
  REQUIRE(port.ok());
  auto peer = client.connect("127.0.0.1", *port);
  REQUIRE(peer.ok());
  return *peer;
}

}  // namespace

TEST_CASE_FIXTURE(two_transports, "bridge: over the comm transports, delivery, replies and down messages") {
  SUBCASE("ucx") { open("ucx"); }
  SUBCASE("tcp") { open("tcp"); }
  {
    bridge server{a, transport_a.get()};
    bridge client{b, transport_b.get()};
    server.publish("echo", a.spawn(echo));
    auto peer = connect_bridges(server, client);
    caf::scoped_actor self{b};
    client.publish("tester", caf::actor_cast<caf::actor>(self));
    auto remote_echo = client.remote_actor(peer, "echo");
    self->monitor(remote_echo);
    for (int k = 0; k < 3; ++k) {
      self->send(remote_echo, status_request{k});
      bool got = false;
      self->receive(
        [&](const cluster_status& x) {
          got = true;
          CHECK(x.plan_version == k + 1);
        },
        caf::after(5s) >> [] {});
      CHECK(got);
    }
    server.close();
    bool down = false;
    self->receive(
      [&](const caf::down_msg& msg) {
        down = true;
        CHECK(msg.reason == caf::exit_reason::remote_link_unreachable);
      },
      caf::after(10s) >> [] {});
    CHECK(down);
  }
}

TEST_CASE_FIXTURE(two_processes, "bridge: Cap'n Proto messages are routed to the actor their type is for") {
  bridge server{a};
  bridge client{b};
  caf::scoped_actor supervisor{a};
  server.publish("supervisor", caf::actor_cast<caf::actor>(supervisor));
  auto peer = link_bridges(server, client);
  caf::scoped_actor agent{b};
  client.publish("agent", caf::actor_cast<caf::actor>(agent));
  join_request join;
  join.inventory = node_inventory{"n1", "z", "CPU", "h", {{0, "cpu", 5}}};
  agent->send(client.remote_actor(peer, "supervisor"), join);
  caf::actor reply_to;
  bool joined = false;
  supervisor->receive(
    [&](const join_request& x) {
      joined = true;
      CHECK(x.inventory.name == "n1");
      reply_to = caf::actor_cast<caf::actor>(supervisor->current_sender());
    },
    caf::after(5s) >> [] {});
  REQUIRE(joined);
  REQUIRE(reply_to);
  supervisor->send(reply_to, join_accepted{"n1", "zone:z", 250, 0});
  bool accepted = false;
  agent->receive(
    [&](const join_accepted& x) {
      accepted = true;
      CHECK(x.heartbeat_interval_ms == 250);
      CHECK(x.zone_actor == "zone:z");
    },
    caf::after(5s) >> [] {});
  CHECK(accepted);
}

TEST_CASE_FIXTURE(two_transports, "bridge: what a process sends just before it closes its bridge and destroys its transport arrives") {
  // A coordinator's shutdown notices are the last thing it sends before it exits: 100 messages
  // of about 100 KiB each (more than the socket buffers hold) are still queued when the sender
  // closes; every one must reach the peer.
  SUBCASE("ucx") { open("ucx"); }
  SUBCASE("tcp") { open("tcp"); }
  constexpr int messages = 100;
  bridge client{b, transport_b.get()};
  caf::scoped_actor receiver{b};
  client.publish("tester", caf::actor_cast<caf::actor>(receiver));
  {
    auto server = std::make_unique<bridge>(a, transport_a.get());
    caf::scoped_actor sender{a};
    server->publish("flood", caf::actor_cast<caf::actor>(sender));
    auto peer = connect_bridges(*server, client);
    receiver->send(client.remote_actor(peer, "flood"), status_request{0});
    caf::actor tester;
    sender->receive([&](const status_request&) {
      tester = caf::actor_cast<caf::actor>(sender->current_sender());
    }, caf::after(5s) >> [] {});
    REQUIRE(tester);
    cluster_status big;
    big.events.assign(100, std::string(1000, 'x'));
    for (int k = 0; k < messages; ++k) {
      big.plan_version = k;
      sender->send(tester, big);
    }
    server.reset();       // closes its links
    transport_a.reset();  // and the process's transport goes with it
  }
  int received = 0;
  bool in_order = true;
  for (bool more = true; more && received < messages;)
    receiver->receive(
      [&](const cluster_status& x) {
        in_order = in_order && x.plan_version == received;
        ++received;
      },
      caf::after(10s) >> [&] { more = false; });
  CHECK(received == messages);
  CHECK(in_order);
}
