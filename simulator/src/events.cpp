// Event-driven simulation of the 1F1B schedule and its Chrome trace.
//
// Each stage is a compute stream that executes its operations in 1F1B order (S-s-1 warm-up
// forwards, then one forward and one backward alternately, then the remaining backwards); an
// operation starts when the stream is free and its input has arrived. Sends follow each
// forward (activation to the next stage) and backward (gradient to the previous): they hold
// the sender's stream when sends block, or queue on a per-direction send lane otherwise. After
// its last backward a stage all-reduces its gradients and steps its optimizer.
#include <algorithm>
#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "sailor/simulator/simulator.hpp"
#include "stage_times.hpp"

namespace sailor::simulator {

namespace {

enum class op_kind { forward, backward };
struct op {
  op_kind kind;
  int micro;
};

struct event {
  double time;
  long seq;  // FIFO among equal times, for determinism
  int stage;
  bool operator>(const event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

}  // namespace

result<event_result> simulate_events(const sim_context& ctx, const config::plan& plan) {
  auto rp = resolve(ctx, plan);
  if (!rp) return rp.error();
  const resolved_plan& p = *rp;
  const int S = p.num_stages;
  std::vector<stage_times> t(S);
  int m = 1;
  for (int s = 0; s < S; ++s) {
    t[s] = compute_stage_times(ctx, p, s);
    m = std::max(m, t[s].micro_batches);
  }
  const bool overlap = ctx.options().overlap_p2p;
  const bool sync_recv = !overlap && ctx.options().receiver_blocks;

  std::vector<std::vector<op>> ops(S);
  for (int s = 0; s < S; ++s) {
    const int warmup = std::min(S - s - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f) ops[s].push_back({op_kind::forward, f});
    while (f < m) {
      ops[s].push_back({op_kind::forward, f++});
      ops[s].push_back({op_kind::backward, b++});
    }
    while (b < m) ops[s].push_back({op_kind::backward, b++});
  }
  const double never = -1;
  std::vector<std::vector<double>> act_arrival(S, std::vector<double>(m, never));
  std::vector<std::vector<double>> grad_arrival(S, std::vector<double>(m, never));
  std::vector<size_t> next(S, 0);
  std::vector<double> free_at(S, 0), fwd_lane(S, 0), bwd_lane(S, 0), done(S, 0);
  std::vector<char> busy(S, 0);
  event_result out;
  std::priority_queue<event, std::vector<event>, std::greater<event>> queue;
  long seq = 0;
  for (int s = 0; s < S; ++s) queue.push({0.0, seq++, s});

  auto ready_at = [&](int s, const op& o) -> double {
    if (o.kind == op_kind::forward) return s == 0 ? 0.0 : act_arrival[s][o.micro];
    return s == S - 1 ? 0.0 : grad_arrival[s][o.micro];
  };
  auto name = [](const char* prefix, int micro) { return std::string(prefix) + std::to_string(micro); };

  while (!queue.empty()) {
    event ev = queue.top();
    queue.pop();
    const int s = ev.stage;
    const double now = ev.time;
    if (busy[s] && now >= free_at[s]) busy[s] = 0;
    if (busy[s] || next[s] >= ops[s].size()) continue;
    const op o = ops[s][next[s]];
    const double ready = ready_at(s, o);
    if (ready < 0 || ready > now) continue;  // its arrival will wake the stage
    ++next[s];
    const bool fwd = o.kind == op_kind::forward;
    const double dur = fwd ? t[s].forward_s : t[s].backward_s;
    double begin = now;
    if (sync_recv) {
      const int from = fwd ? s - 1 : s + 1;
      if (from >= 0 && from < S) {
        const double r = fwd ? t[from].send_forward_s : t[from].send_backward_s;
        out.events.push_back({name(fwd ? "recv F" : "recv B", o.micro), "p2p", s, 0, now, now + r});
        begin = now + r;
      }
    }
    const double end = begin + dur;
    out.events.push_back({name(fwd ? "F" : "B", o.micro), "compute", s, 0, begin, end});
    double stream_free = end;
    const int peer = fwd ? s + 1 : s - 1;
    if (peer >= 0 && peer < S) {
      const double send = fwd ? t[s].send_forward_s : t[s].send_backward_s;
      double& lane = fwd ? fwd_lane[s] : bwd_lane[s];
      const double start = overlap ? std::max(end, lane) : end;
      const double arrival = start + send;
      lane = arrival;
      if (!overlap) stream_free = arrival;
      out.events.push_back({name(fwd ? "send F" : "send B", o.micro), "p2p", s, overlap ? 1 : 0, start, arrival});
      // A synchronous receive starts once the data is posted and takes the transfer time on
      // the receiver's stream; otherwise the data is there on arrival.
      const double posted = sync_recv ? start : arrival;
      (fwd ? act_arrival : grad_arrival)[peer][o.micro] = posted;
      queue.push({posted, seq++, peer});
    }
    busy[s] = 1;
    free_at[s] = stream_free;
    if (next[s] == ops[s].size()) {
      // Last backward done (and sent): gradient sync and optimizer step.
      double at = stream_free;
      if (t[s].allreduce_s > 0) {
        out.events.push_back({"all-reduce", "collective", s, 0, at, at + t[s].allreduce_s});
        at += t[s].allreduce_s;
      }
      out.events.push_back({"update", "optimizer", s, 0, at, at + t[s].update_s});
      done[s] = at + t[s].update_s;
      out.pipeline_s = std::max(out.pipeline_s, stream_free);
    }
    queue.push({stream_free, seq++, s});
  }
  for (int s = 0; s < S; ++s) {
    if (next[s] != ops[s].size())
      return sailor::error{error_kind::failed, "event simulation deadlocked at stage " + std::to_string(s), "", 0, ""};
    out.iteration_time_s = std::max(out.iteration_time_s, done[s]);
  }
  return out;
}

std::string to_chrome_trace(const event_result& r) {
  using json = nlohmann::json;
  json events = json::array();
  int stages = 0;
  for (const auto& e : r.events) stages = std::max(stages, e.stage + 1);
  for (int s = 0; s < stages; ++s) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", s}, {"args", {{"name", "stage " + std::to_string(s)}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", s}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", s}, {"tid", 1}, {"args", {{"name", "sends"}}}});
  }
  for (const auto& e : r.events) {
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", e.stage}, {"tid", e.lane},
                      {"ts", e.start_s * 1e6}, {"dur", (e.end_s - e.start_s) * 1e6}});
  }
  json out;
  out["traceEvents"] = events;
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {{"iteration_time_s", r.iteration_time_s}, {"pipeline_s", r.pipeline_s}};
  return out.dump();
}

}  // namespace sailor::simulator
