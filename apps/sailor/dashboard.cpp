#include "dashboard.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <httplib.h>

#include "dashboard_json.hpp"
#include "dashboard_pool.hpp"
#include "job_metrics.hpp"
#include "dashboard_page.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/config/log.hpp"

namespace sailor::app {

namespace {

class http_server : public httplib::Server {
public:
  // httplib 0.11 (as Debian builds it) listens with a backlog of 5: a burst of pages polling
  // at once overflows it and their connections wait for SYN retries (1 s, 3 s...). Linux
  // takes a second listen() on the bound socket as a new backlog.
  //
  // TCP_DEFER_ACCEPT: a connection is handed over only once its request has arrived (or after
  // `defer_s`). Browsers open spare connections ahead of need, and a client may connect and
  // say nothing: neither then holds a worker waiting for a request.
  void prepare_listener(int backlog, int defer_s) {
    ::listen(svr_sock_, backlog);
    ::setsockopt(svr_sock_, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof defer_s);
  }
};

}  // namespace

struct dashboard::impl {
  dashboard_options options;
  http_server server;
  std::unique_ptr<job_metrics> metrics;  ///< /metrics
  std::thread thread;
  std::uint16_t port = 0;
};

namespace {

constexpr std::size_t max_points_per_request = 5000;
constexpr std::int64_t trace_iterations = 5;
// /api/metrics' phases_s: the medians of the newest this many iterations.
constexpr std::int64_t phase_window = 20;

// A request's path and query are percent-decoded bytes, any bytes: text quoted from them may
// be invalid UTF-8, which JSON cannot hold. Such bytes are sent as U+FFFD rather than throw
// (an exception in the error handler would end the process: httplib does not catch there).
void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& why) {
  send_json(res, {{"error", why}, {"status", status}}, status);
}

// The reason for an error httplib answered itself, before any route (it leaves the body empty).
std::string reason_of(int status, const httplib::Request& req) {
  switch (status) {
    case 404: return "no such page: " + req.path;
    case 413: return "request body too large (at most 64 KiB)";
    case 414: return "request target too long (at most 8192 bytes)";
    case 416: return "malformed or unsatisfiable Range header";
    default: return "malformed request (HTTP/1.1 with a method, a target and headers)";
  }
}

// Every method but GET and HEAD, known to HTTP or not, before its body is read.
httplib::Server::HandlerResponse refuse_writes(const httplib::Request& req,
                                               httplib::Response& res) {
  if (req.method == "GET" || req.method == "HEAD")
    return httplib::Server::HandlerResponse::Unhandled;
  res.set_header("Allow", "GET, HEAD");
  send_error(res, 405, "read-only: only GET and HEAD are served, not " + req.method);
  return httplib::Server::HandlerResponse::Handled;
}

// Refuses parameters the endpoint does not take; true when all were known.
bool known_params(const httplib::Request& req, httplib::Response& res,
                  const std::set<std::string>& known) {
  for (const auto& [name, value] : req.params)
    if (!known.count(name)) {
      std::string list;
      for (const auto& k : known)
        list += (list.empty() ? "" : ", ") + k;
      send_error(res, 400, "unknown query parameter '" + name + "'" +
                             (list.empty() ? " (this endpoint takes none)"
                                           : " (this endpoint takes: " + list + ")"));
      return false;
    }
  return true;
}

void serve_metrics(const actors::status_board& board, const httplib::Request& req,
                   httplib::Response& res) {
  if (!known_params(req, res, {"since", "limit"}))
    return;
  std::int64_t since = 0;
  std::int64_t limit = max_points_per_request;
  if (req.has_param("since")) {
    auto v = parse_query_int("since", req.get_param_value("since"), 0, INT64_MAX / 2);
    if (!v)
      return send_error(res, 400, v.error().message);
    since = *v;
  }
  if (req.has_param("limit")) {
    auto v = parse_query_int("limit", req.get_param_value("limit"), 1, max_points_per_request);
    if (!v)
      return send_error(res, 400, v.error().message);
    limit = *v;
  }
  const auto page = board.metrics(since, static_cast<std::size_t>(limit));
  auto out = metrics_json(page);
  // The split is of the newest iterations, whichever part of the curve was asked for.
  const std::int64_t first_recent = std::max<std::int64_t>(0, page.newest - phase_window + 1);
  out["phases_s"] = phases_json(board.metrics(first_recent, std::size_t{phase_window}));
  send_json(res, out);
}

void add_routes(dashboard::impl& d) {
  auto& svr = d.server;
  const actors::status_board& board = *d.options.board;
  const dashboard_options& opt = d.options;
  const auto page = [&svr](const char* path, const char* type, std::string_view body) {
    svr.Get(path, [type, body](const httplib::Request& req, httplib::Response& res) {
      if (!known_params(req, res, {}))
        return;
      res.set_content(std::string{body}, type);
    });
  };
  page("/", "text/html; charset=utf-8", dashboard_html());
  page("/dashboard.js", "text/javascript; charset=utf-8", dashboard_js());
  page("/dashboard.css", "text/css; charset=utf-8", dashboard_css());
  svr.Get("/api/status", [&board](const httplib::Request& req, httplib::Response& res) {
    if (known_params(req, res, {}))
      send_json(res, live_status_json(*board.snapshot(), std::chrono::steady_clock::now()));
  });
  svr.Get("/api/plan", [&board, &opt](const httplib::Request& req, httplib::Response& res) {
    if (known_params(req, res, {}))
      send_json(res, plan_json(*board.snapshot(), opt.cluster, opt.model));
  });
  svr.Get("/api/metrics", [&board](const httplib::Request& req, httplib::Response& res) {
    serve_metrics(board, req, res);
  });
  svr.Get("/api/events", [&board](const httplib::Request& req, httplib::Response& res) {
    if (known_params(req, res, {}))
      send_json(res, events_json(board.events()));
  });
  svr.Get("/api/trace", [&board](const httplib::Request& req, httplib::Response& res) {
    if (!known_params(req, res, {}))
      return;
    res.set_header("Content-Disposition", "attachment; filename=\"sailor-trace.json\"");
    send_json(res, trace_json(board.reports(trace_iterations)));
  });
  svr.Get("/api/info", [&d](const httplib::Request& req, httplib::Response& res) {
    if (known_params(req, res, {}))
      send_json(res, info_json(d.options.cluster, d.options.model, d.options.host, d.port,
                               is_loopback_host(d.options.host)));
  });
  svr.Get("/metrics", [&d](const httplib::Request& req, httplib::Response& res) {
    if (!known_params(req, res, {}))
      return;
    res.set_header("Cache-Control", "no-store");
    res.set_content(prometheus_text(d.metrics->figures()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  // Read-only: every other method is refused, every other path is not found.
  svr.set_pre_routing_handler(refuse_writes);
  // An error httplib answered before any route (a malformed request, an unknown path) gets a
  // JSON reason. Nothing here may throw: httplib calls this outside its own try.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty())
      return;
    try {
      send_error(res, res.status, reason_of(res.status, req));
    } catch (...) {
      res.set_content("{\"error\":\"malformed request\"}", "application/json");
    }
  });
  // A handler that throws is a bug: the client gets a 500 without the exception's text
  // (httplib would put it in a header), and the log gets the text.
  svr.set_exception_handler(
    [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log::get("actors")->error("[dashboard] {} failed: {}",
                                nlohmann::json(req.path).dump(
                                  -1, ' ', false, nlohmann::json::error_handler_t::replace),
                                what);
      send_error(res, 500, "internal error (the coordinator's log says which)");
    });
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1")
    return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

result<std::unique_ptr<dashboard>> dashboard::start(dashboard_options options) {
  if (!options.board)
    return sailor::error::invalid_input("board", "the dashboard needs a status board");
  if (!is_loopback_host(options.host) && !options.allow_remote)
    return sailor::error::invalid_input(
      "--dashboard", "--dashboard " + options.host +
                       " is not a loopback address: the dashboard shows the whole job to "
                       "anyone who can reach it; add --dashboard-allow-remote to bind it "
                       "there");
  auto state = std::make_unique<impl>();
  state->options = std::move(options);
  auto& d = *state;
  d.metrics = std::make_unique<job_metrics>(d.options.board, d.options.cluster, d.options.model);
  const auto threads = static_cast<std::size_t>(std::max(1, d.options.max_threads));
  d.server.new_task_queue = [threads] { return new dashboard_pool(threads, 4 * threads); };
  // One request per connection: a kept-alive connection holds a worker thread while it is
  // open, and pages poll more often than any useful keep-alive timeout, so a few open pages
  // would hold every worker and the others would queue. A new loopback connection per
  // request costs far less. A connection holds a worker for at most a second waiting for
  // its request, and a client that stops reading (or sending) is dropped when one read or
  // write has waited 2 s: a stalled browser holds one worker for seconds, never the
  // supervisor, and the pool grows past the workers it holds.
  d.server.set_keep_alive_max_count(1);
  d.server.set_keep_alive_timeout(1);
  d.server.set_read_timeout(2, 0);
  d.server.set_write_timeout(2, 0);
  d.server.set_payload_max_length(64 * 1024);
  add_routes(d);
  if (d.options.port == 0) {
    int port = d.server.bind_to_any_port(d.options.host);
    if (port <= 0)
      return sailor::error::of(error_kind::failed, "", "--dashboard",
                               "cannot bind the dashboard to " + d.options.host);
    d.port = static_cast<std::uint16_t>(port);
  } else {
    if (!d.server.bind_to_port(d.options.host, d.options.port))
      return sailor::error::of(error_kind::failed, "", "--dashboard",
                               "cannot bind the dashboard to " + d.options.host + ":" +
                                 std::to_string(d.options.port) + " (in use?)");
    d.port = d.options.port;
  }
  d.server.prepare_listener(256, 2);
  d.thread = std::thread([&d] {
    block_sigpipe_in_this_thread();  // and so in the workers it starts (dashboard_pool.hpp)
    d.server.listen_after_bind();
  });
  // stop() only reaches a server that is listening: wait for it (bounded) so that the
  // destructor can always stop it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (!d.server.is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{1});  // no readiness callback in 0.11
  if (!d.server.is_running()) {
    // Its thread may still start listening on it: left running (leaked) rather than freed
    // under it. Only on a machine too loaded to start a thread in 5 s.
    d.thread.detach();
    state.release();
    return sailor::error::of(error_kind::failed, "", "--dashboard",
                             "the dashboard did not start listening");
  }
  return std::unique_ptr<dashboard>(new dashboard(std::move(state)));
}

dashboard::dashboard(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

dashboard::~dashboard() {
  impl_->server.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::uint16_t dashboard::port() const { return impl_->port; }

std::string dashboard::url() const {
  const auto& host = impl_->options.host;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(impl_->port) + "/";
}

void add_dashboard_options(CLI::App* command, dashboard_args& args) {
  command
    ->add_option("--dashboard", args.address,
                 "HOST:PORT of the web dashboard and its JSON API (port 0: any free port)")
    ->capture_default_str();
  command->add_flag("--dashboard-allow-remote", args.allow_remote,
                    "allow --dashboard on an address other than loopback (it shows the whole "
                    "job to anyone who reaches it; read-only)");
  command->add_flag("--no-dashboard", args.off, "serve no dashboard");
}

result<std::unique_ptr<dashboard>> start_dashboard(const dashboard_args& args,
                                                   std::shared_ptr<const actors::status_board> board,
                                                   const config::cluster& cluster,
                                                   const config::model_shape& model) {
  if (args.off)
    return std::unique_ptr<dashboard>{};
  auto where = comm::address::parse(args.address);
  if (!where)
    return sailor::error::invalid_input("--dashboard", "--dashboard: " + where.error().message);
  dashboard_options options;
  options.host = where->host;
  options.port = where->port;
  options.allow_remote = args.allow_remote;
  options.board = std::move(board);
  options.cluster = cluster;
  options.model = model;
  return dashboard::start(std::move(options));
}

}  // namespace sailor::app
