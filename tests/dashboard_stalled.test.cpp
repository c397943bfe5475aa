// Browsers that stall or vanish do not hold up the coordinator: while `sailor demo` trains,
// one client opens connections and never sends a request, opens others and never reads the
// answer (with the smallest receive buffer it can ask for), and drops others in the middle
// of an answer. Training must go on to the end, every request of a well-behaved page must be
// answered meanwhile, and the coordinator must outlive it all. The pace of training before
// and during is printed (bench/dashboard_clients measures it with many polling pages).

// Built only with LibTorch (the demo's nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "dashboard_support.hpp"
#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_dashboard_stalled {

using namespace std::chrono;
using nlohmann::json;
using namespace sailor::testing;

namespace {

constexpr int iterations = 80;

// A connection to 127.0.0.1:port (-1 when refused). A small receive buffer and segment size
// make the coordinator's answer back up in its send buffer, as over a slow network.
int connect_to(int port, bool small_buffers) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (small_buffers) {
    const int smallest = 1, segment = 536;  // the kernel raises both to its minimum
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &smallest, sizeof smallest);
    ::setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &segment, sizeof segment);
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_get(int fd, const std::string& path) {
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  return ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(request.size());
}

// The stalled browser: connections that stay open without a request, and requests whose
// answers are never read. Closed on destruction.
struct stalled_client {
  std::vector<int> fds;
  stalled_client(int port, int silent, int unread) {
    const char* paths[] = {"/api/metrics?since=0", "/api/trace", "/dashboard.js", "/api/events"};
    for (int k = 0; k < silent + unread; ++k) {
      const int fd = connect_to(port, k >= silent);
      if (fd < 0)
        continue;
      if (k >= silent)
        send_get(fd, paths[k % 4]);
      fds.push_back(fd);
    }
  }
  ~stalled_client() {
    for (int fd : fds)
      ::close(fd);
  }
};

// The vanishing browser: asks for an answer, reads its first bytes (bounded wait), and
// resets the connection in the middle of it. Returns whether an answer had begun.
bool vanish_mid_answer(int port, const std::string& path) {
  const int fd = connect_to(port, true);
  if (fd < 0)
    return false;
  bool begun = false;
  if (send_get(fd, path)) {
    pollfd p{fd, POLLIN, 0};
    char head[64];
    begun = ::poll(&p, 1, 2000) == 1 && ::recv(fd, head, sizeof head, 0) > 0;
  }
  const linger reset{1, 0};  // close with RST, as a killed tab does
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
  return begun;
}

// Mean wall time per iteration over the points with index in [from, to), from their
// completion times (0 when fewer than two).
double wall_pace_s(const json& points, std::size_t from, std::size_t to) {
  to = std::min(to, points.size());
  if (to < from + 2)
    return 0;
  return static_cast<double>(points[to - 1]["unix_ms"].get<std::int64_t>() -
                             points[from]["unix_ms"].get<std::int64_t>()) /
         1000.0 / static_cast<double>(to - 1 - from);
}

}  // namespace

TEST_CASE("dashboard: stalled and vanishing browsers hold up neither training nor other "
          "pages") {
  temp_dir dir;
  dashboard_child demo{demo_with_dashboard_argv({"--nodes", "2", "--zones", "2", "--iterations",
                                                 std::to_string(iterations)},
                                                60),
                       dir, "demo", 20s};
  INFO(demo.output());
  const int port = demo.web_port;
  REQUIRE(port > 0);
  dashboard_client web{port};

  // Training runs: a few iterations of the plan.
  json metrics;
  REQUIRE(eventually(120s, [&] {
    metrics = web.json("/api/metrics?since=0");
    return !running(demo) || (!metrics.is_null() && metrics["newest"] >= 5);
  }));
  REQUIRE(running(demo));
  const auto before = metrics["points"].size();
  REQUIRE(before < iterations - 10);  // most of training is still ahead

  // More stalled connections than the server has workers, then drops mid-answer.
  stalled_client stalled{port, 100, 100};
  CHECK(stalled.fds.size() == 200);
  int begun = 0;
  for (int k = 0; k < 60; ++k)
    begun += vanish_mid_answer(port, k % 2 ? "/api/metrics?since=0" : "/api/trace") ? 1 : 0;
  CHECK(begun > 0);

  // A page polls meanwhile: every request is answered (the client gives up after 5 s).
  int asked = 0, answered = 0;
  REQUIRE(eventually(180s, [&] {
    ++asked;
    auto status = web.get("/api/status");
    metrics = web.json("/api/metrics?since=0");
    answered += status.status == 200 && !metrics.is_null() ? 1 : 0;
    return !running(demo) || (!metrics.is_null() && metrics["newest"] == iterations - 1);
  }));
  REQUIRE(running(demo));  // the coordinator outlived the stalled and vanished clients
  CHECK(answered == asked);
  const auto& points = metrics["points"];
  REQUIRE(points.size() == iterations);
  // The pace before the stalled clients and after (printed: on a loaded machine it varies).
  const double pace_before = wall_pace_s(points, 1, before);
  const double pace_after = wall_pace_s(points, before, points.size());
  MESSAGE("wall time per iteration: " << pace_before << " s before, " << pace_after
                                      << " s with 200 stalled connections ("
                                      << (pace_before > 0 ? pace_after / pace_before : 0)
                                      << "x); " << asked << " polls answered");
  CHECK(pace_after > 0);

  demo.signal(SIGTERM);  // ends the hold
  CHECK(demo.wait_exit(30s) == 0);
}

}  // namespace integration_dashboard_stalled
#endif
