// The dashboard's HTTP surface under malformed input, in-process on a free loopback port: it
// is sent hundreds of requests built from a seeded PRNG over raw sockets (random and
// percent-encoded bytes in paths and queries, invalid UTF-8, every method and some that do not
// exist, odd and broken headers, bodies of every size), and must answer each with a status the
// docs/dashboard.md documents, a JSON reason for every error, no exception text, and go on serving.
// Before this test, `GET /%ff` aborted the coordinator (an nlohmann type_error escaped the 404
// handler, which httplib calls outside its try) and `?since=%ff` answered 500 with the
// exception's text in a header.
#include "dashboard.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using namespace std::chrono;
using nlohmann::json;
using namespace sailor;

namespace {

// What an HTTP/1.1 answer told, read off the wire.
struct raw_answer {
  int status = 0;  ///< 0: the connection closed (or timed out) without a status line
  std::string head;
  std::string body;
  std::string header(const std::string& name) const {
    const auto at = lower(head).find("\r\n" + lower(name) + ":");
    if (at == std::string::npos)
      return {};
    const auto from = head.find_first_not_of(' ', at + name.size() + 3);
    return head.substr(from, head.find("\r\n", from) - from);
  }
  static std::string lower(std::string s) {
    for (auto& c : s)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
};

// Sends `request` as is on a new connection to 127.0.0.1:port and reads the answer until the
// server closes (it serves one request per connection), within `limit`. Interim 1xx answers
// are skipped. The sending side stays open: httplib 0.11 drops its answer to a peer that
// half-closed (it peeks, sees the end of the stream and takes the peer for gone).
raw_answer exchange(int port, const std::string& request, milliseconds limit) {
  raw_answer out;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    out.head = std::string{"connect: "} + std::strerror(errno);
    ::close(fd);
    return out;
  }
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;  // the server answered early and closed: read what it said
    sent += static_cast<std::size_t>(n);
  }
  std::string wire;
  const auto deadline = steady_clock::now() + limit;
  for (;;) {
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0)
      break;
    char buf[8192];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    wire.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // Skip interim answers (100 Continue).
  while (wire.rfind("HTTP/1.1 1", 0) == 0 && wire.find("\r\n\r\n") != std::string::npos)
    wire.erase(0, wire.find("\r\n\r\n") + 4);
  const auto end = wire.find("\r\n\r\n");
  if (wire.rfind("HTTP/1.", 0) != 0 || end == std::string::npos || wire.size() < 12) {
    out.head = wire;  // what came instead, for the failure's message
    return out;
  }
  out.status = std::atoi(wire.substr(9, 3).c_str());
  out.head = wire.substr(0, end + 2);
  out.body = wire.substr(end + 4);
  return out;
}

// Builds random requests, most of them almost valid so that they reach the routes.
class request_maker {
public:
  explicit request_maker(std::uint64_t seed) : rng_(seed) {}

  std::string make() {
    std::string r = method() + " " + target() + " " + pick({"HTTP/1.1", "HTTP/1.1", "HTTP/1.0",
                                                            "HTTP/2", "HTTP/1.1 x", ""}) + "\r\n";
    const std::string body = below(3) == 0 ? bytes(below(4) == 0 ? below(70000) : below(300)) : "";
    r += "Host: 127.0.0.1\r\n";
    for (int h = below(4); h > 0; --h)
      r += header(body.size());
    if (!body.empty() && below(4) != 0)
      r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    r += "\r\n";
    return r + body;
  }

private:
  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string pick(std::initializer_list<const char*> options) {
    return *(options.begin() + below(static_cast<int>(options.size())));
  }
  std::string bytes(int n) {
    std::string s;
    for (int i = 0; i < n; ++i)
      s += static_cast<char>(below(256));
    return s;
  }
  std::string escaped_byte() {
    static const char* hex = "0123456789abcdefABCDEF";
    return std::string{"%"} + hex[below(22)] + hex[below(22)];
  }
  // A path, query or value: known names, random bytes, escapes (valid, invalid UTF-8, broken).
  std::string piece() {
    std::string s;
    for (int n = below(6); n >= 0; --n) {
      switch (below(8)) {
        case 0: s += escaped_byte(); break;
        case 1: s += pick({"%ff", "%fe", "%c3%28", "%e2%82", "%00", "%", "%g1", "%2F", "%25"}); break;
        case 2: s += bytes(below(4) + 1); break;
        case 3: s += pick({"api", "status", "metrics", "plan", "events", "trace", "info", ".."}); break;
        case 4: s += pick({"since", "limit", "=", "&", "?", "/", "+", "#"}); break;
        case 5: s += std::to_string(below(100000) - 50000); break;
        case 6: s += "\xff\xfe"; break;
        default: s += "a"; break;
      }
    }
    // A request line holds no CR, LF or space (the parser would see other fields).
    for (auto& c : s)
      if (c == '\r' || c == '\n' || c == ' ')
        c = '_';
    return s;
  }
  std::string method() {
    return below(8) == 0 ? piece()
                         : pick({"GET", "GET", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                                 "OPTIONS", "TRACE", "CONNECT", "PRI", "FOO", "get"});
  }
  std::string target() {
    switch (below(6)) {
      case 0: return "/" + piece();
      case 1: return pick({"/api/metrics", "/api/status", "/api/events", "/", "/api/trace"}) +
                     std::string{"?"} + piece() + "=" + piece();
      case 2: return "/api/metrics?since=" + piece() + (below(2) ? "&limit=" + piece() : "");
      case 3: return pick({"/api/", "/api/plan", "/api/info", "/dashboard.js", "/nothing"}) + piece();
      case 4: return below(10) == 0 ? "/" + std::string(9000, 'a') : piece();
      default: return pick({"/", "/api/status", "/api/metrics", "/api/events", "/api/plan"});
    }
  }
  std::string header(std::size_t body_size) {
    switch (below(8)) {
      case 0: return "Range: " + pick({"bytes=0-10", "bytes=5-1", "bytes=x", "items=1-2"}) + "\r\n";
      case 1: return "Content-Length: " + pick({"-1", "abc", "99999999999", "0"}) + "\r\n";
      case 2: return piece() + ": " + piece() + "\r\n";
      case 3: return "no colon here\r\n";
      case 4: return "Expect: 100-continue\r\n";
      case 5: return "Accept-Encoding: gzip, br\r\n";
      case 6: return "Content-Type: application/json\r\n";
      default: return "X-Size: " + std::to_string(body_size) + "\r\n";
    }
  }
  std::mt19937_64 rng_;
};

// The statuses docs/dashboard.md documents.
const std::set<int> documented{200, 400, 404, 405, 413, 414, 416};

// Checks one answer; false when it broke a promise (the reason is in the INFO).
void check_answer(const std::string& request, const raw_answer& a) {
  INFO("request: " << json(request).dump(-1, ' ', true, json::error_handler_t::replace));
  INFO("answer head: " << a.head);
  REQUIRE(a.status != 0);  // every request is answered
  CHECK(documented.count(a.status) == 1);
  CHECK(a.header("EXCEPTION_WHAT").empty());
  if (a.status == 405)
    CHECK(a.header("Allow") == "GET, HEAD");
  // (A body the client accepted compressed or asked a range of is not read here.)
  if (a.status >= 400 && !a.body.empty() && a.header("Content-Encoding").empty() &&
      a.header("Content-Range").empty()) {
    const auto body = json::parse(a.body, nullptr, false);
    REQUIRE(body.is_object());
    CHECK(body.value("status", 0) == a.status);
    CHECK(!body.value("error", std::string{}).empty());
  }
}

// A dashboard on a board with one published status, on a free port of 127.0.0.1.
std::unique_ptr<app::dashboard> serve_board() {
  auto board = std::make_shared<actors::status_board>();
  actors::board_snapshot snap;
  snap.status.phase = "collecting";
  board->publish(snap);
  app::dashboard_options options;
  options.board = board;
  options.max_threads = 8;
  auto started = app::dashboard::start(std::move(options));
  REQUIRE(started);
  return std::move(*started);
}

}  // namespace

TEST_CASE("dashboard: the requests of the issue, and malformed ones from a seeded PRNG, are all "
          "answered with a documented status, and the dashboard serves on") {
  const auto web = serve_board();
  const int port = web->port();

  // The requests the issue reported, then the random ones.
  const std::vector<std::pair<std::string, int>> known{
    {"GET /%ff HTTP/1.1\r\nHost: x\r\n\r\n", 404},
    {"GET /api/%ff HTTP/1.1\r\nHost: x\r\n\r\n", 404},
    {"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 404},
    {"HEAD /%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n", 404},
    {"GET /api/metrics?since=%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    {"GET /api/metrics?limit=%c3%28 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    {"GET /api/status?%ff=1 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    {"OPTIONS /api/status HTTP/1.1\r\nHost: x\r\n\r\n", 405},
    {"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", 405},
    {"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n", 405},
    {"DELETE /api/status HTTP/1.1\r\nHost: x\r\n\r\n", 405},
    {"POST /api/status HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", 405},
    {"GET /api/status HTTP/1.1\r\nHost: x\r\n\r\n", 200},
  };
  for (const auto& [request, status] : known) {
    const auto a = exchange(port, request, 5s);
    check_answer(request, a);
    CHECK(a.status == status);
  }
  CHECK(exchange(port, known[4].first, 5s).body.find("since") != std::string::npos);

  request_maker maker{20261128};
  std::map<int, int> statuses;
  int sent = 0;
  const auto deadline = steady_clock::now() + 60s;
  for (; sent < 600 && steady_clock::now() < deadline; ++sent) {
    const auto request = maker.make();
    const auto a = exchange(port, request, 5s);
    check_answer(request, a);
    ++statuses[a.status];
  }
  MESSAGE("sent " << sent << " requests; answers by status: " << json(statuses).dump());
  CHECK(sent >= 200);
  // Every kind of answer was exercised, and the dashboard still serves.
  for (int status : {200, 400, 404, 405})
    CHECK(statuses[status] > 0);
  const auto after = exchange(port, "GET /api/status HTTP/1.1\r\nHost: x\r\n\r\n", 5s);
  CHECK(after.status == 200);
  CHECK(json::parse(after.body)["phase"] == "collecting");
}

namespace {

// An iteration whose forward and backward take 0.2 s + 1 ms per iteration index, the other
// phases fixed, and 10 ms left over for bookkeeping.
actors::iteration_record phased_iteration(std::int64_t iteration, double extra_s = 0) {
  actors::iteration_record r;
  r.iteration = iteration;
  r.loss = 2.0;
  r.data_s = 0.01;
  r.compute_s = 0.2 + 0.001 * static_cast<double>(iteration) + extra_s;
  r.send_wait_s = 0.02;
  r.recv_wait_s = 0.03;
  r.all_reduce_s = 0.04;
  r.optimizer_s = 0.05;
  r.checkpoint_s = 0;
  r.measured_s = 0.15 + r.compute_s + 0.01;
  r.tokens = 1024;
  return r;
}

json get_json(int port, const std::string& path) {
  const auto a = exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", 5s);
  REQUIRE(a.status == 200);
  return json::parse(a.body);
}

}  // namespace

TEST_CASE("dashboard: /api/metrics splits the newest iterations by phase, each plan's first "
          "left out, whatever part of the curve was asked for") {
  auto board = std::make_shared<actors::status_board>();
  app::dashboard_options options;
  options.board = board;
  options.max_threads = 4;
  auto started = app::dashboard::start(std::move(options));
  REQUIRE(started);
  const int port = (*started)->port();

  // Before any iteration: the phases are there, all zero, over no iteration.
  auto empty = get_json(port, "/api/metrics?since=0")["phases_s"];
  CHECK(empty["iterations"] == 0);
  CHECK(empty["iteration"].get<double>() == 0);

  // Plan 1 for iterations 0..24, plan 2 from 25 on; each plan's first iteration is 3 s slower
  // (warm-up), which the medians must not see.
  for (std::int64_t k = 0; k < 30; ++k)
    board->add_iteration(phased_iteration(k, k == 0 || k == 25 ? 3.0 : 0.0), k < 25 ? 1 : 2, 0.4);
  for (const char* path : {"/api/metrics?since=0", "/api/metrics?since=28&limit=1"}) {
    INFO(path);
    const auto phases = get_json(port, path)["phases_s"];
    INFO(phases.dump());
    // The newest 20 (10..29) less plan 2's first: 19, whose middle is iteration 19.
    CHECK(phases["iterations"] == 19);
    CHECK(phases["forward_backward"].get<double>() == doctest::Approx(0.219));
    CHECK(phases["data"].get<double>() == doctest::Approx(0.01));
    CHECK(phases["send_wait"].get<double>() == doctest::Approx(0.02));
    CHECK(phases["recv_wait"].get<double>() == doctest::Approx(0.03));
    CHECK(phases["all_reduce"].get<double>() == doctest::Approx(0.04));
    CHECK(phases["optimizer"].get<double>() == doctest::Approx(0.05));
    CHECK(phases["checkpoint"].get<double>() == doctest::Approx(0.0));
    CHECK(phases["bookkeeping"].get<double>() == doctest::Approx(0.01));
    CHECK(phases["iteration"].get<double>() == doctest::Approx(0.379));
    double sum = 0;
    for (const char* name : {"data", "forward_backward", "send_wait", "recv_wait", "all_reduce",
                             "optimizer", "checkpoint", "bookkeeping"}) {
      CHECK(phases[name].get<double>() >= 0);
      sum += phases[name].get<double>();
    }
    CHECK(sum == doctest::Approx(phases["iteration"].get<double>()));
  }
}
