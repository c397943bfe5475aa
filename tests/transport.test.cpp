// Conformance suite of the transport interface, run against every backend (UCX, TCP and
// UCX behind the link shaper): ordering, payload sizes with contents checked, handshake
// refusals, garbage on the listening port, errors when a peer process is SIGKILLed, and no
// callback firing twice. Peer processes are this executable re-run with
// SAILOR_TRANSPORT_PEER set (see "peer process" below). Every wait is bounded.

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
#include "sailor/comm/link_table.hpp"
#include "sailor/protocol/codec.hpp"
#include "transport_support.hpp"

extern char** environ;

using namespace sailor;
using namespace sailor::comm;
using sailor::test::event_box;

namespace {

constexpr double wait_s = 20.0;

// Control payloads are protocol envelopes, as the runtime sends them.
std::vector<std::byte> encode(const std::string& from, protocol::message m) {
  return protocol::encode(protocol::envelope{protocol::protocol_version, from, "x", std::move(m)});
}
std::optional<protocol::envelope> decode(std::span<const std::byte> bytes) {
  auto out = protocol::decode(bytes);
  if (auto* e = std::get_if<protocol::envelope>(&out)) return std::move(*e);
  return std::nullopt;
}

comm::transport_options opts(const std::string& name, const std::string& zone = "zone-a") {
  comm::transport_options o;
  o.local_name = name;
  o.local_zone = zone;
  o.connect_timeout_s = 10;
  return o;
}

std::vector<std::byte> patterned(std::size_t size, std::uint64_t seed) {
  std::vector<std::byte> v(size);
  for (std::size_t i = 0; i < size; ++i) v[i] = sailor::test::pattern_byte(i, seed);
  return v;
}

bool matches(std::span<const std::byte> bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != sailor::test::pattern_byte(i, seed)) return false;
  return true;
}

// A server that records everything it receives, in order.
struct recording_server {
  struct item {
    bool tensor = false;
    std::vector<std::byte> control;
    tensor_descriptor desc;
    payload_buffer payload;
  };
  event_box box;
  std::vector<item> items;
  std::vector<connection_ptr> accepted;
  std::vector<transport_error> errors;
  std::vector<std::pair<address, transport_error>> refusals;  // told by the listener
  std::unique_ptr<listener> lst;

  connection_handlers handlers() {
    connection_handlers h;
    h.on_control = [this](std::vector<std::byte> bytes) {
      box.update([&] { items.push_back({false, std::move(bytes), {}, {}}); });
    };
    h.on_tensor = [this](tensor_descriptor d, payload_buffer p) {
      box.update([&] { items.push_back({true, {}, std::move(d), std::move(p)}); });
    };
    h.on_error = [this](const transport_error& e) { box.update([&] { errors.push_back(e); }); };
    return h;
  }

  void listen(transport& t) {
    auto l = t.listen(
        address{"127.0.0.1", 0},
        [this](const connection_ptr& c) {
          box.update([&] { accepted.push_back(c); });
          return handlers();
        },
        [this](const address& peer, const transport_error& why) {
          box.update([&] { refusals.emplace_back(peer, why); });
        });
    REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : l.error().to_string()));
    lst = std::move(*l);
  }
  std::size_t count() {
    std::lock_guard lock(box.mutex());
    return items.size();
  }
};

struct client_events {
  event_box box;
  bool opened = false;
  std::vector<transport_error> errors;
  connection_handlers handlers() {
    connection_handlers h;
    h.on_open = [this] { box.update([&] { opened = true; }); };
    h.on_error = [this](const transport_error& e) { box.update([&] { errors.push_back(e); }); };
    return h;
  }
};

// Counts completions per send id; a second call for one id is recorded as a defect.
struct completions {
  event_box box;
  std::map<int, int> calls;
  std::map<int, op_status> outcome;
  completion make(int id) {
    return [this, id](const op_status& st) {
      box.update([&] {
        ++calls[id];
        outcome[id] = st;
      });
    };
  }
  bool all_done(int n) {
    return box.wait_for([&] { return static_cast<int>(calls.size()) >= n; }, wait_s);
  }
  int max_calls() {
    std::lock_guard lock(box.mutex());
    int m = 0;
    for (auto& [id, c] : calls) m = std::max(m, c);
    return m;
  }
  int failures() {
    std::lock_guard lock(box.mutex());
    int f = 0;
    for (auto& [id, st] : outcome) f += st.has_value();
    return f;
  }
};

}  // namespace

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
        recording_server server;
        auto server_t = b.make(server_opts);
        auto client_t = b.make(client_opts);
        server.listen(*server_t);
        client_events ev;
        auto conn = client_t->connect(server.lst->local_address(), ev.handlers());
        REQUIRE(conn.ok());
        auto small = patterned(1000, 5);
        auto large = patterned(1 << 20, 6);
        completions done;
        (*conn)->send_tensor({dtype::u8, {1000}, 0, "", 0}, small, done.make(0));
        (*conn)->send_tensor({dtype::u8, {1 << 20}, 1, "", 0}, large, done.make(1));
        (*conn)->send_control(encode("client", protocol::shutdown_notice{"after"}), done.make(2));
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
    recording_server server;
    auto server_t = b.make(server_opts);
    auto client_t = b.make(client_opts);
    server.listen(*server_t);
    client_events ev;
    auto conn = client_t->connect(server.lst->local_address(), ev.handlers());
    REQUIRE(conn.ok());
    auto small = patterned(1000, 5);
    completions done;
    (*conn)->send_tensor({dtype::u8, {1000}, 0, "", 0}, small, done.make(0));
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

namespace {

const sailor::test::backend* find_backend(const std::string& name) {
  static const auto backends = sailor::test::all_backends();
  for (const auto& b : backends)
    if (b.name == name) return &b;
  return nullptr;
}

// A child process: this executable re-run on the "peer process" test case.
struct child_process {
  pid_t pid = -1;
  int from_child = -1;  // read end of a pipe the child writes its port into

  ~child_process() { kill_and_reap(); }

  void kill_and_reap() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
      pid = -1;
    }
    if (from_child >= 0) ::close(from_child);
    from_child = -1;
  }

  static std::unique_ptr<child_process> spawn(const std::string& role, const std::string& backend,
                                              int port) {
    auto child = std::make_unique<child_process>();
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("SAILOR_TRANSPORT_PEER=" + role);
    env_strings.push_back("SAILOR_TRANSPORT_BACKEND=" + backend);
    env_strings.push_back("SAILOR_TRANSPORT_PORT=" + std::to_string(port));
    env_strings.push_back("SAILOR_TRANSPORT_FD=" + std::to_string(fds[1]));
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string a1 = "--test-case=transport peer process";
    std::string a2 = "--no-skip";
    std::vector<char*> argv = {exe.data(), a1.data(), a2.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    int rc = ::posix_spawn(&child->pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    child->from_child = fds[0];
    REQUIRE(rc == 0);
    return child;
  }

  /// Reads the port the child announces; 0 after `seconds` without one.
  int read_port(double seconds) {
    std::string text;
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      fd_set set;
      FD_ZERO(&set);
      FD_SET(from_child, &set);
      timeval tv{0, 100000};
      if (::select(from_child + 1, &set, nullptr, nullptr, &tv) > 0) {
        char buf[32];
        auto n = ::read(from_child, buf, sizeof(buf));
        if (n <= 0) return 0;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.find('\n') != std::string::npos) return std::atoi(text.c_str());
      }
    }
    return 0;
  }
};

}  // namespace

TEST_CASE("transport peer process" * doctest::skip()) {
  // Run only as a child of the tests below (with --no-skip).
  const char* role = std::getenv("SAILOR_TRANSPORT_PEER");
  REQUIRE(role != nullptr);
  const auto* b = find_backend(std::getenv("SAILOR_TRANSPORT_BACKEND"));
  REQUIRE(b != nullptr);
  int out_fd = std::atoi(std::getenv("SAILOR_TRANSPORT_FD"));
  auto t = b->make(opts(std::string("peer-") + role));
  REQUIRE(t);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  if (std::string(role) == "sink") {
    std::atomic<std::uint64_t> bytes{0};
    auto l = t->listen(address{"127.0.0.1", 0}, [&](const connection_ptr&) {
      connection_handlers h;
      h.on_tensor = [&](tensor_descriptor, payload_buffer p) { bytes += p.size(); };
      return h;
    });
    REQUIRE(l.ok());
    auto line = std::to_string((*l)->local_address().port) + "\n";
    [[maybe_unused]] auto n = ::write(out_fd, line.data(), line.size());
    while (std::chrono::steady_clock::now() < deadline)  // until killed (bounded)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // sleep override: a child that waits to be killed
  } else {
    int port = std::atoi(std::getenv("SAILOR_TRANSPORT_PORT"));
    auto conn = t->connect(address{"127.0.0.1", static_cast<std::uint16_t>(port)}, {});
    REQUIRE(conn.ok());
    auto payload = patterned(32 << 20, 3);
    std::atomic<int> in_flight{0};
    while (std::chrono::steady_clock::now() < deadline) {  // until killed (bounded)
      if (in_flight < 2) {
        ++in_flight;
        (*conn)->send_tensor({dtype::u8, {32 << 20}, 0, "", 0}, payload,
                             [&](const op_status&) { --in_flight; });
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // sleep override: a child pacing its sends until killed
      }
    }
  }
}

TEST_CASE("transport conformance: a receiver killed mid-transfer is an error on the sender") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    auto child = child_process::spawn("sink", b.name, 0);
    int port = child->read_port(wait_s);
    REQUIRE(port > 0);
    client_events ev;
    auto t = b.make(opts("sender"));
    auto conn = t->connect(address{"127.0.0.1", static_cast<std::uint16_t>(port)}, ev.handlers());
    REQUIRE(conn.ok());
    auto payload = patterned(64 << 20, 9);
    completions done;
    int issued = 0;
    // Two transfers in flight; once the first has gone through, kill the receiver.
    for (; issued < 2; ++issued) (*conn)->send_tensor({dtype::u8, {64 << 20}, 0, "", 0}, payload, done.make(issued));
    REQUIRE(done.box.wait_for([&] { return !done.calls.empty(); }, wait_s));
    (*conn)->send_tensor({dtype::u8, {64 << 20}, 0, "", 0}, payload, done.make(issued++));
    child->kill_and_reap();
    REQUIRE(ev.box.wait_for([&] { return !ev.errors.empty(); }, wait_s));
    REQUIRE(done.all_done(issued));
    CHECK(done.failures() >= 1);
    // A failed connection stays failed: a later send fails at once, on_error never again.
    completions later;
    (*conn)->send_tensor({dtype::u8, {1}, 0, "", 0}, std::span(payload).first(1), later.make(0));
    REQUIRE(later.all_done(1));
    CHECK(later.outcome[0].has_value());
    CHECK((*conn)->state() == connection_state::failed);
    std::lock_guard lock(ev.box.mutex());
    CHECK(ev.errors.size() == 1);
    CHECK(ev.errors[0].code == errc::disconnected);
    CHECK(done.max_calls() == 1);
  }
}

TEST_CASE("transport conformance: a sender killed mid-transfer is an error on the receiver") {
  for (const auto& b : sailor::test::all_backends()) {
    CAPTURE(b.name);
    recording_server server;
    auto t = b.make(opts("receiver"));
    server.listen(*t);
    auto child = child_process::spawn("source", b.name, server.lst->local_address().port);
    REQUIRE(server.box.wait_for([&] { return !server.items.empty(); }, wait_s));
    child->kill_and_reap();
    REQUIRE(server.box.wait_for([&] { return !server.errors.empty(); }, wait_s));
    std::lock_guard lock(server.box.mutex());
    CHECK(server.errors.size() == 1);
    CHECK(server.errors[0].code == errc::disconnected);
    REQUIRE(server.accepted.size() == 1);
    CHECK(server.accepted[0]->state() == connection_state::failed);
    for (auto& it : server.items) CHECK(matches(it.payload.bytes(), 3));
  }
}

// ---------------------------------------------------------------- link shaping

TEST_CASE("link shaping never delivers before the configured latency and bandwidth allow (20 ms, 50 MB/s)") {
  config::cluster cl;
  cl.regions = {{"r1", {"zone-a"}}, {"r2", {"zone-b"}}};
  cl.zones = {{"zone-a", "r1", {}}, {"zone-b", "r2", {}}};
  config::zone_link link;
  link.from = "zone-a";
  link.to = "zone-b";
  link.latency_s = 0.020;
  link.bandwidth_gbytes_per_s = 0.050;
  cl.links = {link};
  auto shaped = [&](const std::string& name, const std::string& zone) {
    return make_shaped_transport(sailor::test::make_ucx(opts(name, zone)), links_of(cl));
  };
  using clk = std::chrono::steady_clock;
  event_box box;
  std::vector<clk::time_point> arrivals;
  std::vector<std::byte> landing(4u << 20, std::byte{1});
  client_events ev;
  auto server_t = shaped("server", "zone-a");
  auto client_t = shaped("client", "zone-b");
  auto l = server_t->listen(address{"127.0.0.1", 0}, [&](const connection_ptr&) {
    connection_handlers h;
    h.allocate = [&](const tensor_descriptor& d) {
      return payload_buffer(landing.data(), d.bytes, nullptr);
    };
    h.on_control = [&](std::vector<std::byte>) { box.update([&] { arrivals.push_back(clk::now()); }); };
    h.on_tensor = [&](tensor_descriptor, payload_buffer) {
      box.update([&] { arrivals.push_back(clk::now()); });
    };
    return h;
  });
  REQUIRE(l.ok());
  auto conn = client_t->connect((*l)->local_address(), ev.handlers());
  REQUIRE(conn.ok());
  REQUIRE(ev.box.wait_for([&] { return ev.opened; }, wait_s));

  // Latency: small messages one at a time, in order. The shaper never releases early, so
  // every sample is at least the latency (how close it holds to it is bench/transport's
  // figure: a bound above would fail on a loaded machine).
  std::vector<double> one_way;
  for (int i = 0; i < 7; ++i) {
    auto sent = clk::now();
    (*conn)->send_control(encode("client", protocol::heartbeat{"client", static_cast<std::uint64_t>(i)}), nullptr);
    REQUIRE(box.wait_for([&] { return arrivals.size() == static_cast<std::size_t>(i + 1); }, wait_s));
    std::lock_guard lock(box.mutex());
    one_way.push_back(std::chrono::duration<double>(arrivals.back() - sent).count());
  }
  std::sort(one_way.begin(), one_way.end());
  CHECK(one_way[0] >= 0.99 * 0.020);

  // Bandwidth: six 4 MiB tensors back to back, all delivered; the link serialises them at
  // 50 MB/s, so the first arrives no sooner than the latency and one serialization time, and
  // the last no sooner than the latency and six. The burst runs twice.
  const std::size_t mib4 = 4u << 20;
  auto payload = patterned(mib4, 1);
  const double expected_first = 0.020 + mib4 / 50e6;
  const double expected_last = 0.020 + 6 * mib4 / 50e6;
  double first = INFINITY, last = INFINITY;
  completions sends;  // the payload must outlive its sends
  for (int trial = 0; trial < 2; ++trial) {
    std::size_t before;
    {
      std::lock_guard lock(box.mutex());
      before = arrivals.size();
    }
    auto sent = clk::now();
    for (int i = 0; i < 6; ++i)
      (*conn)->send_tensor({dtype::u8, {static_cast<std::int64_t>(mib4)}, 0, "", 0}, payload,
                           sends.make(trial * 6 + i));
    REQUIRE(box.wait_for([&] { return arrivals.size() == before + 6; }, wait_s));
    REQUIRE(sends.all_done((trial + 1) * 6));
    std::lock_guard lock(box.mutex());
    first = std::min(first, std::chrono::duration<double>(arrivals[before] - sent).count());
    last = std::min(last, std::chrono::duration<double>(arrivals[before + 5] - sent).count());
  }
  CHECK(first >= 0.99 * expected_first);
  CHECK(last >= 0.99 * expected_last);
}

TEST_CASE("link shaping: a link changed at run time holds the bytes sent from then on (20 ms, then 150 ms)") {
  config::zone_link link;
  link.latency_s = 0.020;
  link.bandwidth_gbytes_per_s = 0.050;
  auto changes = std::make_shared<link_table>();
  auto lookup = overridden(changes, [link](const std::string& a, const std::string& b) {
    return a == b ? config::zone_link{} : link;
  });
  using clk = std::chrono::steady_clock;
  event_box box;
  std::vector<clk::time_point> arrivals;
  client_events ev;
  auto server_t = make_shaped_transport(sailor::test::make_tcp(opts("server", "zone-a")), lookup);
  auto client_t = make_shaped_transport(sailor::test::make_tcp(opts("client", "zone-b")), lookup);
  auto l = server_t->listen(address{"127.0.0.1", 0}, [&](const connection_ptr&) {
    connection_handlers h;
    h.on_control = [&](std::vector<std::byte>) { box.update([&] { arrivals.push_back(clk::now()); }); };
    return h;
  });
  REQUIRE(l.ok());
  auto conn = client_t->connect((*l)->local_address(), ev.handlers());
  REQUIRE(conn.ok());
  REQUIRE(ev.box.wait_for([&] { return ev.opened; }, wait_s));
  // One message at a time on the one open connection: its one-way time, never under the
  // link's latency (the shaper never releases early; an upper bound would fail under load).
  auto one_way = [&](int i) {
    auto sent = clk::now();
    (*conn)->send_control(encode("client", protocol::heartbeat{"client", static_cast<std::uint64_t>(i)}), nullptr);
    REQUIRE(box.wait_for([&] { return arrivals.size() == static_cast<std::size_t>(i + 1); }, wait_s));
    std::lock_guard lock(box.mutex());
    return std::chrono::duration<double>(arrivals.back() - sent).count();
  };
  CHECK(one_way(0) >= 0.99 * 0.020);
  changes->set(*parse_link_change("zone-b:zone-a=150,50", "test"));
  CHECK(one_way(1) >= 0.99 * 0.150);
  CHECK(one_way(2) >= 0.99 * 0.150);
}

TEST_CASE("a link probe measures the shaped link (20 ms, 50 MB/s), and a dead responder is an error") {
  config::cluster cl;
  cl.regions = {{"r1", {"zone-a"}}, {"r2", {"zone-b"}}};
  cl.zones = {{"zone-a", "r1", {}}, {"zone-b", "r2", {}}};
  config::zone_link link;
  link.from = "zone-a";
  link.to = "zone-b";
  link.latency_s = 0.020;
  link.bandwidth_gbytes_per_s = 0.050;
  cl.links = {link};
  auto shaped = [&](const std::string& name, const std::string& zone) {
    return make_shaped_transport(sailor::test::make_tcp(opts(name, zone)), links_of(cl));
  };
  auto responder_t = shaped("responder", "zone-a");
  auto prober_t = shaped("prober", "zone-b");
  auto l = responder_t->listen(address{"127.0.0.1", 0}, probe_responder());
  REQUIRE(l.ok());
  auto r = probe_link(*prober_t, (*l)->local_address());
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  // Loose bounds only (a loaded machine adds time, never removes it): the shaper never
  // releases early, so the latency is at least the link's and no size beats its bandwidth.
  CHECK(r->latency_s >= 0.015);
  REQUIRE(r->bandwidth.size() >= 2);
  CHECK(r->bandwidth.front().first == doctest::Approx(64 << 10));
  for (const auto& [bytes, rate] : r->bandwidth)
    CHECK(rate <= 60e6);
  CHECK(r->bandwidth.back().second >= 5e6);  // a 10x slower machine still reads the order
  CHECK(r->elapsed_s < 3);                   // the budget is 0.6 s; loose for load
  auto measured = measured_link(link, *r);
  CHECK(measured.latency_s == doctest::Approx(r->latency_s));
  CHECK(measured.bytes_per_s(64 << 10) == doctest::Approx(r->bandwidth.front().second));
  // Nobody answers: the probe fails within its timeout, naming the address.
  const auto gone = (*l)->local_address();
  // The whole responder goes: a listener alone closes on the transport's thread, and a probe
  // sent at once could still be accepted (it was, once, under ctest -j2).
  l->reset();
  responder_t.reset();
  probe_options quick;
  quick.timeout_s = 1;
  auto failed = probe_link(*prober_t, gone, quick);
  REQUIRE(!failed.ok());
  CHECK(failed.error().message.find(gone.to_string()) != std::string::npos);
}

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
