#pragma once
// The coordinator's dashboard: a web page and a read-only JSON API over HTTP (Debian's
// cpp-httplib), served on the server's own threads from what the job supervisor publishes on
// a status_board. A request copies the newest snapshot and never waits on the supervisor; the
// supervisor never waits on a request.
//
//   GET /                  the page (its script and style at /dashboard.js, /dashboard.css)
//   GET /api/status        what `sailor status --json` prints
//   GET /api/plan          the current plan (stages x replicas), its prediction and price
//   GET /api/metrics?since=ITER[&limit=N]   the loss curve from iteration ITER, re-plan marks,
//                          and the newest iterations split by phase (phases_s)
//   GET /api/events        joins, losses, preemptions, re-plans (reason, recovery time)
//   GET /api/trace         the newest iterations' measured phases per rank, Chrome trace JSON
//   GET /api/info          the cluster (zones, links, prices), the model, where this is bound
//   GET /metrics           the job's figures in Prometheus' text format (job_metrics.hpp)
// Unknown paths get 404, a bad query or a malformed request 400, anything but GET/HEAD 405
// (with Allow), each with a JSON reason; a request HTTP refuses itself 413, 414 or 416. Bytes
// of a path or query that are not UTF-8 are quoted as U+FFFD, never a reason to fail.

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "sailor/actors/status_board.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

struct dashboard_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;     ///< 0: any free port
  bool allow_remote = false;  ///< a host other than loopback is refused without it
  std::shared_ptr<const actors::status_board> board;
  config::cluster cluster;
  config::model_shape model;
  int max_threads = 64;  ///< HTTP worker threads, started as connections wait (dashboard_pool)
};

class dashboard {
public:
  /// Binds and starts serving on a thread of its own.
  static result<std::unique_ptr<dashboard>> start(dashboard_options options);
  ~dashboard();
  dashboard(const dashboard&) = delete;
  dashboard& operator=(const dashboard&) = delete;

  std::uint16_t port() const;
  /// "http://HOST:PORT/".
  std::string url() const;

  struct impl;

private:
  explicit dashboard(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

/// The dashboard options of `sailor coordinator` and `sailor demo`.
struct dashboard_args {
  std::string address = "127.0.0.1:0";
  bool allow_remote = false;
  bool off = false;
};
void add_dashboard_options(CLI::App* command, dashboard_args& args);

/// Starts the dashboard as `args` say; null when it is off. Errors say which option is wrong.
result<std::unique_ptr<dashboard>> start_dashboard(const dashboard_args& args,
                                                   std::shared_ptr<const actors::status_board> board,
                                                   const config::cluster& cluster,
                                                   const config::model_shape& model);

/// True for 127.0.0.0/8, ::1 and localhost.
bool is_loopback_host(const std::string& host);

}  // namespace sailor::app
