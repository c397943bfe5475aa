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
#include <set>

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

// The all-reduce over every rank that ends the iteration, and the host's CPU bound (the same
// as the closed form's: finish_iteration).
static void add_final(const sim_context& ctx, const resolved_plan& p, const stage_times* t, event_result& out) {
  const double final_s = final_allreduce_s(ctx, p);
  if (final_s > 0)
    out.events.push_back({"final all-reduce", "collective", 0, 0, out.iteration_time_s, out.iteration_time_s + final_s});
  out.iteration_time_s = finish_iteration(ctx, p, t, out.iteration_time_s);
}

// Stages with different replica counts: every replica is its own stream with its own share of
// the micro-batches (global micro-batch j goes to replica j mod R_s of stage s, as our runtime
// routes them), its own compute (its GPU type and TP) and its own links to the replicas it
// exchanges with; a stage's all-reduce starts when its last replica is done.
namespace {

// One replica of one stage in the per-replica event simulation: its times, its micro-batches
// and where its schedule stands.
struct replica_stream {
  int stage, replica;
  double forward_s, backward_s, update_s;
  std::vector<int> mine;  // its micro-batches, in order
  size_t next_f = 0, next_b = 0;
  double free_at = 0, fwd_lane = 0, bwd_lane = 0, done = 0;
  bool busy = false;
};

}  // namespace

// Every replica's stream, stage by stage; first_unit[s] is stage s's first stream (and
// first_unit[S] the count).
static std::vector<replica_stream> make_streams(const sim_context& ctx, const resolved_plan& p, int M,
                                                std::vector<int>& first_unit) {
  std::vector<replica_stream> units;
  first_unit.assign(p.num_stages + 1, 0);
  for (int s = 0; s < p.num_stages; ++s) {
    first_unit[s] = static_cast<int>(units.size());
    const auto& st = p.stages[s];
    for (int r = 0; r < st.num_replicas; ++r) {
      const endpoint& e = st.replicas[r];
      stage_compute c = ctx.compute(e.gpu, e.tp, p.micro_batch, st.first, st.end);
      const double k = host_slowdown(ctx, p);
      replica_stream u{s, r, k * c.forward_s, k * (c.backward_s + (st.recompute ? c.forward_s : 0.0)),
                       k * c.update_s, {}};
      for (int j = r; j < M; j += st.num_replicas) u.mine.push_back(j);
      units.push_back(std::move(u));
    }
  }
  first_unit[p.num_stages] = static_cast<int>(units.size());
  return units;
}

// Per stage: the all-reduce starts when its last replica is done; each replica then steps.
static void add_sync_and_update(const sim_context& ctx, const resolved_plan& p,
                                const std::vector<replica_stream>& units, const std::vector<int>& first_unit,
                                event_result& out) {
  for (int s = 0; s < p.num_stages; ++s) {
    double start = 0;
    for (int u = first_unit[s]; u < first_unit[s + 1]; ++u) start = std::max(start, units[u].done);
    const auto& st = p.stages[s];
    // Under DiLoCo each region's replicas all-reduce among themselves, side by side.
    double ar = 0;
    for (int region = p.inner_steps > 0 ? 0 : -1; region < (p.inner_steps > 0 ? p.num_regions : 0); ++region) {
      int n = 0;
      const endpoint* group = replicas_in(st, region, n);
      ar = std::max(ar, ctx.allreduce_s(group, n, ctx.params_per_gpu(1, st.first, st.end),
                                        ctx.options().allreduce_per_layer ? st.end - st.first : 0));
    }
    if (ar > 0) out.events.push_back({"all-reduce", "collective", s, 0, start, start + ar});
    for (int u = first_unit[s]; u < first_unit[s + 1]; ++u) {
      const double at = start + std::max(0.0, ar);
      out.events.push_back({"update", "optimizer", s, 2 * units[u].replica, at, at + units[u].update_s});
      out.iteration_time_s = std::max(out.iteration_time_s, at + units[u].update_s);
    }
  }
}

static result<event_result> simulate_events_per_replica(const sim_context& ctx, const resolved_plan& p) {
  const int S = p.num_stages;
  const bool overlap = ctx.options().overlap_p2p;
  const bool sync_recv = !overlap && ctx.options().receiver_blocks;
  const int M = std::max(1, (p.global_batch + p.micro_batch - 1) / p.micro_batch);
  const double act = ctx.activation_bytes(p.micro_batch);
  std::vector<int> first_unit;
  std::vector<replica_stream> units = make_streams(ctx, p, M, first_unit);
  auto unit_of = [&](int s, int j) { return first_unit[s] + j % p.stages[s].num_replicas; };
  auto link_s = [&](int from_unit, int to_unit) {
    const replica_stream& a = units[from_unit];
    const replica_stream& b = units[to_unit];
    return ctx.transfer_s(p.stages[a.stage].replicas[a.replica], p.stages[b.stage].replicas[b.replica], act);
  };
  const double never = -1;
  std::vector<std::vector<double>> act_arrival(S, std::vector<double>(M, never));
  std::vector<std::vector<double>> grad_arrival(S, std::vector<double>(M, never));
  std::vector<std::vector<double>> transfer(S, std::vector<double>(M, 0));  // receive time, sync_recv
  std::vector<std::vector<double>> grad_transfer(S, std::vector<double>(M, 0));
  event_result out;
  std::priority_queue<event, std::vector<event>, std::greater<event>> queue;
  long seq = 0;
  for (int u = 0; u < static_cast<int>(units.size()); ++u) queue.push({0.0, seq++, u});
  auto name = [](const char* prefix, int micro) { return std::string(prefix) + std::to_string(micro); };
  while (!queue.empty()) {
    event ev = queue.top();
    queue.pop();
    replica_stream& w = units[ev.stage];
    const int s = w.stage;
    const double now = ev.time;
    if (w.busy && now >= w.free_at) w.busy = false;
    if (w.busy || w.next_b >= w.mine.size()) continue;
    // As our runtime schedules it: the oldest backward when its gradient is there, otherwise
    // the next forward when its activation is there and fewer than S-s micro-batches are in
    // flight (1F1B's bound); with different replica counts a fixed order could deadlock.
    auto arrived = [&](double at) { return at >= 0 && at <= now; };
    op o{op_kind::forward, -1};
    if (w.next_b < w.next_f && (s == S - 1 || arrived(grad_arrival[s][w.mine[w.next_b]]))) {
      o = {op_kind::backward, w.mine[w.next_b++]};
    } else if (w.next_f < w.mine.size() && w.next_f - w.next_b < size_t(S - s) &&
               (s == 0 || arrived(act_arrival[s][w.mine[w.next_f]]))) {
      o = {op_kind::forward, w.mine[w.next_f++]};
    } else {
      continue;  // an arrival will wake it
    }
    const bool fwd = o.kind == op_kind::forward;
    const int lane = 2 * w.replica;
    double begin = now;
    if (sync_recv && (fwd ? s > 0 : s + 1 < S)) {
      const double r = fwd ? transfer[s][o.micro] : grad_transfer[s][o.micro];
      out.events.push_back({name(fwd ? "recv F" : "recv B", o.micro), "p2p", s, lane, now, now + r});
      begin = now + r;
    }
    const double end = begin + (fwd ? w.forward_s : w.backward_s);
    out.events.push_back({name(fwd ? "F" : "B", o.micro), "compute", s, lane, begin, end});
    double stream_free = end;
    const int peer_stage = fwd ? s + 1 : s - 1;
    if (peer_stage >= 0 && peer_stage < S) {
      const int peer = unit_of(peer_stage, o.micro);
      const double send = link_s(ev.stage, peer);
      double& lane_free = fwd ? w.fwd_lane : w.bwd_lane;
      const double start = overlap ? std::max(end, lane_free) : end;
      const double arrival = start + send;
      lane_free = arrival;
      if (!overlap) stream_free = arrival;
      out.events.push_back({name(fwd ? "send F" : "send B", o.micro), "p2p", s, overlap ? lane + 1 : lane, start, arrival});
      const double posted = sync_recv ? start : arrival;
      (fwd ? act_arrival : grad_arrival)[peer_stage][o.micro] = posted;
      (fwd ? transfer : grad_transfer)[peer_stage][o.micro] = send;
      queue.push({posted, seq++, peer});
    }
    w.busy = true;
    w.free_at = stream_free;
    if (w.next_b == w.mine.size()) {
      w.done = stream_free;
      out.pipeline_s = std::max(out.pipeline_s, stream_free);
    }
    queue.push({stream_free, seq++, ev.stage});
  }
  for (const auto& w : units)
    if (w.next_b != w.mine.size())
      return sailor::error::failed("event simulation deadlocked at stage " + std::to_string(w.stage) + " replica " +
                                   std::to_string(w.replica));
  add_sync_and_update(ctx, p, units, first_unit, out);
  std::vector<stage_times> t(S);
  for (int s = 0; s < S; ++s) t[s] = compute_stage_times(ctx, p, s);
  add_final(ctx, p, t.data(), out);
  return out;
}

namespace {

// Each stage's order of operations under 1F1B with `m` micro-batches: S - s - 1 warm-up
// forwards (at most m), then a forward and a backward in turn, then the backwards left.
std::vector<std::vector<op>> one_f_one_b(int S, int m) {
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
  return ops;
}

// A stage's last backward is done (and sent) at `from`: its gradient sync and optimizer step
// go on its timeline; the time its iteration ends.
double sync_and_step(const stage_times& t, int s, double from, event_result& out) {
  double at = from;
  if (t.allreduce_s > 0) {
    out.events.push_back({"all-reduce", "collective", s, 0, at, at + t.allreduce_s});
    at += t.allreduce_s;
  }
  out.events.push_back({"update", "optimizer", s, 0, at, at + t.update_s});
  return at + t.update_s;
}

}  // namespace

// One representative pipeline (every stage has the same replica count) of `region`'s replicas
// (all when region < 0).
static result<event_result> simulate_events_uniform(const sim_context& ctx, const resolved_plan& p, int region) {
  const int S = p.num_stages;
  std::vector<stage_times> t(S);
  int m = 1;
  for (int s = 0; s < S; ++s) {
    t[s] = compute_stage_times(ctx, p, s, region);
    m = std::max(m, t[s].micro_batches);
  }
  const bool overlap = ctx.options().overlap_p2p;
  const bool sync_recv = !overlap && ctx.options().receiver_blocks;

  const std::vector<std::vector<op>> ops = one_f_one_b(S, m);
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
      done[s] = sync_and_step(t[s], s, stream_free, out);
      out.pipeline_s = std::max(out.pipeline_s, stream_free);
    }
    queue.push({stream_free, seq++, s});
  }
  for (int s = 0; s < S; ++s) {
    if (next[s] != ops[s].size())
      return sailor::error::failed("event simulation deadlocked at stage " + std::to_string(s));
    out.iteration_time_s = std::max(out.iteration_time_s, done[s]);
  }
  add_final(ctx, p, t.data(), out);
  return out;
}

result<event_result> simulate_events(const sim_context& ctx, const config::plan& plan) {
  auto rp = resolve(ctx, plan);
  if (!rp) return rp.error();
  const resolved_plan& p = *rp;
  const int S = p.num_stages;
  bool uniform = true;
  for (int s = 1; s < S; ++s) uniform = uniform && p.stages[s].num_replicas == p.stages[0].num_replicas;
  if (p.inner_steps <= 0) return uniform ? simulate_events_uniform(ctx, p, -1) : simulate_events_per_replica(ctx, p);
  // DiLoCo: the slowest region's inner iteration (each replica on its own when counts differ:
  // its micro-batches keep it in its region), then the exchange's exposed share of it.
  result<event_result> slowest = sailor::error::failed("no region");
  int slowest_region = 0;
  for (int region = 0; region < (uniform ? p.num_regions : 1); ++region) {
    auto r = uniform ? simulate_events_uniform(ctx, p, region) : simulate_events_per_replica(ctx, p);
    if (!r) return r;
    if (!slowest || r->iteration_time_s > slowest->iteration_time_s) slowest = std::move(r), slowest_region = region;
  }
  std::vector<stage_times> t(S);
  for (int s = 0; s < S; ++s) t[s] = compute_stage_times(ctx, p, s, uniform ? slowest_region : -1);
  const outer_exchange x = outer_exchange_of(ctx, p, t.data(), slowest->iteration_time_s);
  if (x.exposed_s > 0)
    slowest->events.push_back({"outer exchange (exposed, per iteration)", "collective", 0, 0,
                               slowest->iteration_time_s, slowest->iteration_time_s + x.exposed_s});
  slowest->iteration_time_s += x.exposed_s;
  return slowest;
}

std::string to_chrome_trace(const event_result& r) {
  using json = nlohmann::json;
  json events = json::array();
  int stages = 0, lanes = 2;
  // Tracks that hold events, and compute tracks that also hold sends (sends that block the
  // sender's stream, without overlap_p2p): only those are named, so no track is empty.
  std::set<std::pair<int, int>> used, blocking_sends;
  for (const auto& e : r.events) {
    stages = std::max(stages, e.stage + 1);
    lanes = std::max(lanes, e.lane + 1 + (e.lane % 2 == 0 ? 1 : 0));
    used.insert({e.stage, e.lane});
    if (e.lane % 2 == 0 && e.name.rfind("send", 0) == 0) blocking_sends.insert({e.stage, e.lane});
  }
  for (int s = 0; s < stages; ++s) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", s}, {"args", {{"name", "stage " + std::to_string(s)}}}});
    // lane 2r: compute stream of replica r (of the representative pipeline when r = 0), 2r+1: its sends
    for (int l = 0; l < lanes; ++l) {
      if (!used.count({s, l})) continue;
      std::string name = l % 2 == 0 ? (blocking_sends.count({s, l}) ? "compute and sends" : "compute") : "sends";
      if (lanes > 2) name = "replica " + std::to_string(l / 2) + " " + name;
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", s}, {"tid", l}, {"args", {{"name", name}}}});
    }
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
