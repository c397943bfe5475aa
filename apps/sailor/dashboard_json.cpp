#include "dashboard_json.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include "sailor/actors/iteration_phases.hpp"

#include "status_json.hpp"

namespace sailor::app {

using nlohmann::json;

nlohmann::json live_status_json(const actors::board_snapshot& s,
                                std::chrono::steady_clock::time_point now) {
  auto out = status_json(s.status);
  // Ages were taken when the supervisor published; count on to this request.
  const auto since = s.published == std::chrono::steady_clock::time_point{}
                       ? 0
                       : std::chrono::duration_cast<std::chrono::milliseconds>(now - s.published)
                           .count();
  for (auto& node : out["nodes"]) {
    auto age = node["heartbeat_age_ms"].get<std::int64_t>();
    if (age >= 0)
      node["heartbeat_age_ms"] = age + std::max<std::int64_t>(0, since);
  }
  return out;
}

nlohmann::json plan_json(const actors::board_snapshot& s, const config::cluster& cluster,
                         const config::model_shape& model) {
  json out;
  out["plan_version"] = s.status.plan_version;
  out["phase"] = s.status.phase;
  out["summary"] = s.status.plan_summary;
  if (!s.plan) {
    out["plan"] = nullptr;
    return out;
  }
  const auto& p = *s.plan;
  json plan;
  plan["micro_batch"] = p.micro_batch;
  plan["global_batch"] = p.global_batch;
  plan["stages"] = json::array();
  double usd_per_hour = 0;
  int gpus = 0;
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    const auto& st = p.stages[k];
    json stage{{"stage", k},
               {"first_layer", st.first_layer},
               {"num_layers", st.num_layers},
               {"recompute", st.recompute},
               {"replicas", json::array()}};
    for (std::size_t r = 0; r < st.replicas.size(); ++r) {
      const auto& rep = st.replicas[r];
      stage["replicas"].push_back({{"replica", r},
                                   {"gpu_type", rep.gpu_type},
                                   {"zone", rep.zone},
                                   {"tp", rep.tp},
                                   {"nodes", rep.nodes},
                                   {"devices", rep.devices}});
      usd_per_hour += rep.tp * cluster.usd_per_gpu_hour(rep.gpu_type);
      gpus += rep.tp;
    }
    plan["stages"].push_back(std::move(stage));
  }
  out["plan"] = std::move(plan);
  out["gpus"] = gpus;
  out["usd_per_hour"] = usd_per_hour;
  double predicted = s.predicted_s;
  if (predicted <= 0 && p.estimate)
    predicted = p.estimate->iteration_time_s;
  out["predicted_iteration_s"] = predicted;
  const double tokens = static_cast<double>(p.global_batch) * model.sequence;
  out["predicted_tokens_per_s"] = predicted > 0 ? tokens / predicted : 0.0;
  if (p.estimate)
    out["estimate"] = {{"iteration_time_s", p.estimate->iteration_time_s},
                       {"cost_per_hour_usd", p.estimate->cost_per_hour_usd},
                       {"peak_memory_bytes", p.estimate->peak_memory_bytes}};
  return out;
}

nlohmann::json metrics_json(const actors::status_board::metrics_page& page) {
  json out;
  out["curve_id"] = page.curve_id;
  out["newest"] = page.newest;
  out["more"] = page.more;
  out["points"] = json::array();
  for (const auto& p : page.points) {
    const auto& r = p.record;
    json point{{"iteration", p.iteration},
                             {"plan_version", p.plan_version},
                             {"unix_ms", p.unix_ms},
                             {"loss", r.loss},
                             {"measured_s", r.measured_s},
                             {"predicted_s", p.predicted_s},
                             {"compute_s", r.compute_s},
                             {"send_wait_s", r.send_wait_s},
                             {"recv_wait_s", r.recv_wait_s},
                             {"all_reduce_s", r.all_reduce_s},
                             {"tokens", r.tokens},
                             {"tokens_per_s", r.measured_s > 0
                                                ? static_cast<double>(r.tokens) / r.measured_s
                                                : 0.0}};
    // Only where a validation pass ran after this iteration (the job's eval_every).
    if (r.val_loss)
      point["val_loss"] = *r.val_loss;
    out["points"].push_back(std::move(point));
  }
  out["replans"] = json::array();
  for (const auto& m : page.plans) {
    json mark{{"plan_version", m.plan_version},
              {"first_iteration", m.first_iteration},
              {"unix_ms", m.unix_ms},
              {"reason", m.reason}};
    if (m.recovery_s >= 0)
      mark["recovery_s"] = m.recovery_s;
    out["replans"].push_back(std::move(mark));
  }
  // The newest validation loss on the curve (null: none yet, or a job without eval_every);
  // each point that had a validation pass carries its own as `val_loss`.
  out["validation_loss"] = nullptr;
  for (auto p = page.points.rbegin(); p != page.points.rend(); ++p)
    if (p->record.val_loss) {
      out["validation_loss"] = *p->record.val_loss;
      break;
    }
  return out;
}

nlohmann::json phases_json(const actors::status_board::metrics_page& recent) {
  std::vector<actors::iteration_record> records;
  for (const auto& p : recent.points)
    records.push_back(p.record);
  std::set<std::int64_t> warm_up;
  for (const auto& m : recent.plans)
    warm_up.insert(m.first_iteration);
  const auto split = actors::median_phases(records, warm_up);
  json out = json::object();
  for (const auto& [name, seconds] : split.phases)
    out[name] = seconds;
  out["iteration"] = split.iteration_s;
  out["iterations"] = split.iterations;
  return out;
}

nlohmann::json events_json(const std::vector<actors::board_event>& events) {
  json out;
  out["events"] = json::array();
  for (const auto& e : events) {
    json j{{"seq", e.seq},
           {"unix_ms", e.unix_ms},
           {"kind", e.kind},
           {"plan_version", e.plan_version},
           {"text", e.text}};
    if (!e.node.empty())
      j["node"] = e.node;
    if (!e.reason.empty())
      j["reason"] = e.reason;
    if (e.recovery_s >= 0)
      j["recovery_s"] = e.recovery_s;
    out["events"].push_back(std::move(j));
  }
  return out;
}

namespace {

json trace_metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

nlohmann::json trace_json(const std::vector<actors::board_rank_report>& reports) {
  json events = json::array();
  // An iteration's start (µs since the epoch): its end is when the report arrived.
  const auto start_us = [](const actors::board_rank_report& r) {
    return r.arrival_unix_ms * 1000 - static_cast<std::int64_t>(r.report.total_s * 1e6);
  };
  std::int64_t base_us = 0;
  for (const auto& r : reports)
    base_us = base_us == 0 ? start_us(r) : std::min(base_us, start_us(r));
  std::map<int, bool> stages_named;
  std::map<int, bool> ranks_named;
  for (const auto& r : reports) {
    const auto& x = r.report;
    const int pid = x.stage;
    if (!stages_named[pid])
      events.push_back(trace_metadata("process_name", pid, 0, "stage " + std::to_string(pid)));
    stages_named[pid] = true;
    if (!ranks_named[x.rank])
      events.push_back(trace_metadata("thread_name", pid, x.rank,
                                      "rank " + std::to_string(x.rank) + " (replica " +
                                        std::to_string(x.replica) + ", tp " +
                                        std::to_string(x.tp_rank) + ") on " + x.node));
    ranks_named[x.rank] = true;
    double at = static_cast<double>(start_us(r) - base_us);
    json args{{"iteration", x.iteration}, {"plan_version", x.plan_version}, {"loss", x.loss}};
    events.push_back({{"ph", "X"}, {"name", "iteration " + std::to_string(x.iteration)},
                      {"cat", "iteration"}, {"pid", pid}, {"tid", x.rank}, {"ts", at},
                      {"dur", x.total_s * 1e6}, {"args", args}});
    const std::pair<const char*, double> phases[] = {{"compute", x.compute_s},
                                                     {"recv wait", x.recv_wait_s},
                                                     {"send wait", x.send_wait_s},
                                                     {"all-reduce", x.all_reduce_s}};
    for (const auto& [name, seconds] : phases) {
      if (seconds <= 0)
        continue;
      events.push_back({{"ph", "X"}, {"name", name}, {"cat", "phase"}, {"pid", pid},
                        {"tid", x.rank}, {"ts", at}, {"dur", seconds * 1e6}, {"args", args}});
      at += seconds * 1e6;
    }
  }
  json out;
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {
    {"source", "sailor coordinator: measured per-rank phase sums of the newest iterations"},
    {"note", "the runtime reports how long each phase took in an iteration, not when it "
             "started: each iteration ends when its report reached the coordinator and its "
             "phases are laid end to end inside it"},
    {"base_unix_us", base_us}};
  return out;
}

nlohmann::json info_json(const config::cluster& cluster, const config::model_shape& model,
                         const std::string& host, std::uint16_t port, bool loopback) {
  json out;
  out["cluster"] = cluster.name;
  out["model"] = {{"name", model.name},
                  {"layers", model.num_all_layers()},
                  {"sequence", model.sequence},
                  {"parameters", model.total_params()}};
  out["dashboard"] = {{"host", host}, {"port", port}, {"loopback_only", loopback}};
  out["zones"] = json::array();
  for (const auto& z : cluster.zones) {
    json gpus = json::object();
    for (const auto& [type, count] : z.gpus)
      gpus[type] = {{"count", count}, {"usd_per_hour", cluster.usd_per_gpu_hour(type)}};
    out["zones"].push_back({{"name", z.name}, {"region", z.region}, {"gpus", gpus}});
  }
  out["links"] = json::array();
  for (std::size_t a = 0; a < cluster.zones.size(); ++a)
    for (std::size_t b = a + 1; b < cluster.zones.size(); ++b) {
      auto l = cluster.link(cluster.zones[a].name, cluster.zones[b].name);
      out["links"].push_back({{"from", cluster.zones[a].name},
                              {"to", cluster.zones[b].name},
                              {"latency_ms", l.latency_s * 1e3},
                              {"bandwidth_gbytes_per_s", l.bandwidth_gbytes_per_s},
                              {"egress_usd_per_gb", l.egress_usd_per_gb}});
    }
  return out;
}

result<std::int64_t> parse_query_int(const std::string& name, const std::string& text,
                                     std::int64_t min, std::int64_t max) {
  auto refuse = [&] {
    return sailor::error::invalid_input(name, name + ": expected a whole number from " +
                                                std::to_string(min) + " to " + std::to_string(max) +
                                                ", got '" + text + "'");
  };
  if (text.empty() || text.size() > 19)
    return refuse();
  for (char c : text)
    if (c < '0' || c > '9')
      return refuse();
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno != 0 || v < min || v > max)
    return refuse();
  return static_cast<std::int64_t>(v);
}

}  // namespace sailor::app
