#pragma once
// The dashboard's JSON documents, built from what the supervisor published (pure functions:
// no I/O, no locks; unit-testable).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/actors/status_board.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

/// /api/status: `sailor status --json` of the snapshot, heartbeat ages counted to `now`.
nlohmann::json live_status_json(const actors::board_snapshot& s,
                                std::chrono::steady_clock::time_point now);

/// /api/plan: the plan as stages x replicas, its predicted iteration time, tokens/s and $/hour.
nlohmann::json plan_json(const actors::board_snapshot& s, const config::cluster& cluster,
                         const config::model_shape& model);

/// /api/metrics (its phases_s is added by phases_json).
nlohmann::json metrics_json(const actors::status_board::metrics_page& page);

/// /api/metrics' `phases_s`: one iteration split by phase (data, forward_backward, send_wait,
/// recv_wait, all_reduce, optimizer, checkpoint, bookkeeping) and its whole (`iteration`),
/// medians in seconds over `recent`'s points, each the slowest rank's (actors::median_phases,
/// as the run summary's `phases_s`), each plan's first iteration left out when others are
/// there; `iterations` says how many the medians are over (0: none yet, every figure 0).
nlohmann::json phases_json(const actors::status_board::metrics_page& recent);

/// /api/events.
nlohmann::json events_json(const std::vector<actors::board_event>& events);

/// /api/trace: Chrome trace JSON (Perfetto, chrome://tracing) of the ranks' reports. The
/// runtime reports, per rank and iteration, the sums of its phases (compute, waiting to
/// receive, waiting to send, all-reduce) and the total, not when each started: an iteration
/// ends when its report reached the supervisor, and its phases are laid end to end in it.
nlohmann::json trace_json(const std::vector<actors::board_rank_report>& reports);

/// /api/info: zones (with their GPUs and prices), links, the model and where the dashboard
/// is bound.
nlohmann::json info_json(const config::cluster& cluster, const config::model_shape& model,
                         const std::string& host, std::uint16_t port, bool loopback);

/// Parses a query value that must be a whole number in [min, max]; an error says why.
result<std::int64_t> parse_query_int(const std::string& name, const std::string& text,
                                     std::int64_t min, std::int64_t max);

}  // namespace sailor::app
