// Transport conformance with a peer in another process: the peer is this executable re-run
// with SAILOR_TRANSPORT_PEER set ("transport peer process" below), SIGKILLed mid-transfer;
// the survivor must see an error, never a hang. Every wait is bounded.

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
namespace integration_transport_processes {


using namespace sailor;
using namespace sailor::comm;
using namespace sailor::test;

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

}  // namespace integration_transport_processes
