// Plan resolution, the closed form of the 1F1B iteration, and the full estimate.
#include "sailor/simulator/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "stage_times.hpp"

namespace sailor::simulator {

namespace {

std::string fmt_gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace

namespace {
bool same_kind(const endpoint& a, const endpoint& b) { return a.gpu == b.gpu && a.tp == b.tp; }
bool same_place(const endpoint& a, const endpoint& b) { return same_kind(a, b) && a.zone == b.zone; }
// Copies of one activation that cross from replica x to replica y (sim_options::p2p_partitioned).
double p2p_copies(const sim_context& ctx, const endpoint& x, const endpoint& y) {
  return ctx.options().p2p_partitioned ? 1.0 : double(std::max(1, y.tp));
}
// Replica i of a stage talks to replica i (mod count) of its neighbour: `talk(i, x, y)` for
// each such pair of stages `a` and `b`, as many as the larger replica set.
template <class Talk>
void for_each_replica_pair(const resolved_plan::stage& a, const resolved_plan::stage& b, Talk&& talk) {
  const int n = std::max(a.num_replicas, b.num_replicas);
  for (int i = 0; i < n; ++i) talk(i, a.replicas[i % a.num_replicas], b.replicas[i % b.num_replicas]);
}
}  // namespace

int micro_batches_of(const resolved_plan& p, int s) {
  const int r = std::max(1, p.stages[s].num_replicas);
  const int per_replica = (p.global_batch + r - 1) / r;  // the busiest replica
  return std::max(1, (per_replica + p.micro_batch - 1) / p.micro_batch);
}

namespace {
// The plan's ranks: every replica's TP ranks.
double ranks_of(const resolved_plan& p) {
  double ranks = 0;
  for (const auto& st : p.stages)
    for (int r = 0; r < st.num_replicas; ++r) ranks += std::max(1, st.replicas[r].tp);
  return ranks;
}
}  // namespace

double host_cpu_scale(const sim_options& o, double ranks) {
  const auto& table = o.host_cpu_scale;
  if (o.host_cores <= 0 || table.empty()) return 1.0;
  auto above = table.lower_bound(static_cast<int>(std::ceil(ranks)));
  if (above == table.end()) return std::prev(above)->second;
  if (above == table.begin() || above->first == ranks) return above->second;
  const auto below = std::prev(above);
  const double w = (ranks - below->first) / double(above->first - below->first);
  return below->second + w * (above->second - below->second);
}

// Ranks sharing a host's cores (sim_options::host_cores): while more ranks compute than there
// are cores, each runs at cores / ranks of its own speed; the schedule is costed as if all
// were computing at once (its bubbles make that pessimistic, the CPU bound of cpu_bound_s
// optimistic). Each pass's CPU work is the profile's at the plan's count of ranks
// (sim_options::host_cpu_scale).
double host_slowdown(const sim_context& ctx, const resolved_plan& p) {
  const double cores = ctx.options().host_cores;
  if (cores <= 0) return 1.0;
  const double ranks = ranks_of(p);
  return host_cpu_scale(ctx.options(), ranks) * std::max(1.0, ranks / cores);
}

stage_times compute_stage_times(const sim_context& ctx, const resolved_plan& p, int s, int region) {
  stage_times t;
  const auto& st = p.stages[s];
  const double slowdown = host_slowdown(ctx, p);
  const endpoint* previous = nullptr;
  for (int r = 0; r < st.num_replicas; ++r) {
    const endpoint& e = st.replicas[r];
    if (region >= 0 && e.region != region) continue;  // another region's pipelines
    if (previous && same_kind(e, *previous)) continue;  // same GPU type and TP: same times
    previous = &e;
    stage_compute c = ctx.compute(e.gpu, e.tp, p.micro_batch, st.first, st.end);
    double f = c.forward_s * slowdown, b = c.backward_s * slowdown;
    if (st.recompute) b += f;  // the forward runs again before the backward
    if (f + b > t.forward_s + t.backward_s) {
      t.slowest = r;
    }
    t.forward_s = std::max(t.forward_s, f);
    t.backward_s = std::max(t.backward_s, b);
    t.update_s = std::max(t.update_s, c.update_s * slowdown);
    t.analytic = t.analytic || c.analytic;
  }
  const double act = ctx.activation_bytes(p.micro_batch);
  auto worst_transfer = [&](int from_stage, int to_stage) {
    const auto& a = p.stages[from_stage];
    const auto& b = p.stages[to_stage];
    double worst = 0;
    for_each_replica_pair(a, b, [&](int i, const endpoint& x, const endpoint& y) {
      if (region >= 0 && x.region != region) return;
      if (i > 0 && same_place(x, a.replicas[(i - 1) % a.num_replicas]) &&
          same_place(y, b.replicas[(i - 1) % b.num_replicas]))
        return;
      worst = std::max(worst, ctx.transfer_s(x, y, act));
    });
    return worst;
  };
  if (s + 1 < p.num_stages) t.send_forward_s = worst_transfer(s, s + 1);
  if (s > 0) t.send_backward_s = worst_transfer(s, s - 1);
  int n = 0;
  const endpoint* group = replicas_in(st, region, n);
  t.allreduce_s = ctx.allreduce_s(group, n, ctx.params_per_gpu(1, st.first, st.end),
                                  ctx.options().allreduce_per_layer ? st.end - st.first : 0);
  t.micro_batches = micro_batches_of(p, s);
  return t;
}

double final_allreduce_s(const sim_context& ctx, const resolved_plan& p) {
  if (!ctx.options().final_allreduce) return 0;
  // One endpoint per replica (its TP ranks reduce alongside, in the same zone), 16 bytes.
  thread_local std::vector<endpoint> all;
  all.clear();
  for (const auto& st : p.stages)
    for (int r = 0; r < st.num_replicas; ++r) {
      endpoint e = st.replicas[r];
      e.tp = 1;  // the buffer is not sharded
      all.push_back(e);
    }
  if (all.size() < 2) return 0;
  const double v = ctx.allreduce_s(all.data(), static_cast<int>(all.size()), 16.0 / ctx.options().grad_bytes_per_param, 1);
  return v > 0 ? v : 0;
}

double cpu_bound_s(const sim_context& ctx, const resolved_plan& p, const stage_times* t) {
  const auto& o = ctx.options();
  if (o.host_cores <= 0) return 0;
  const int S = p.num_stages;
  const int M = std::max(1, (p.global_batch + p.micro_batch - 1) / p.micro_batch);
  double work = 0;
  for (int s = 0; s < S; ++s) {
    const auto& st = p.stages[s];
    const int R = std::max(1, st.num_replicas);
    const int messages = (s > 0 ? 2 : 0) + (s + 1 < S ? 2 : 0);  // per micro-batch: send and receive
    const double dp_calls = R > 1 ? (o.allreduce_per_layer ? double(st.end - st.first) : 1.0) : 0.0;
    const double collectives = dp_calls + (o.final_allreduce ? 1.0 : 0.0);
    for (int r = 0; r < R; ++r) {
      const endpoint& e = st.replicas[r];
      const stage_compute c = ctx.compute(e.gpu, e.tp, p.micro_batch, st.first, st.end);
      const double micro = double((M + R - 1 - r) / R);
      const double f = c.forward_s, b = c.backward_s + (st.recompute ? c.forward_s : 0.0);
      const double rank = micro * (f + b + messages * o.cpu_per_message_s) + c.update_s +
                          collectives * o.cpu_per_collective_s;
      work += std::max(1, e.tp) * rank;
    }
  }
  // Stage 0 ends its backward last; its gradient sync and the final all-reduce are waits that
  // no rank's work fills.
  return work * host_cpu_scale(o, ranks_of(p)) / o.host_cores + (S > 0 ? t[0].allreduce_s : 0.0) +
         final_allreduce_s(ctx, p);
}

double finish_iteration(const sim_context& ctx, const resolved_plan& p, const stage_times* t,
                        double schedule_iteration_s) {
  return std::max(schedule_iteration_s + final_allreduce_s(ctx, p), cpu_bound_s(ctx, p, t));
}

pipeline_times combine(const sim_context& ctx, const stage_times* t, int S) {
  // A stage's period: compute, plus its sends (and receives) when they block it, or at least
  // the slowest of its links when they overlap compute. After the pipeline, stage s finishes
  // its last backward earlier than stage 0 by the backward chain below it; it then sends,
  // all-reduces and updates.
  const bool overlap = ctx.options().overlap_p2p;
  pipeline_times out;
  double steady = 0;
  // 1F1B lets stage s have at most S-s micro-batches in flight, so its period is also at least
  // the loop through the stages after it (compute and transfers) over S-s.
  double loop[resolved_plan::max_stages];
  double tail = 0;
  for (int s = S - 1; s >= 0; --s) {
    tail += t[s].forward_s + t[s].backward_s + (s + 1 < S ? t[s].send_forward_s + t[s + 1].send_backward_s : 0.0);
    loop[s] = tail / (S - s);
  }
  // Stage k's view: the first micro-batch reaches it through the stages before (and its last
  // gradient leaves back through them): A_k; it works m_k periods; while its first micro-batch
  // makes the round trip R_k through the stages after it, it can only run its S-k-1 warm-up
  // forwards (W_k), so it idles max(0, R_k - W_k). The pipeline takes the largest over k; for
  // the last stage (R = W = 0) this is the classic round trip + (m-1) periods.
  double before = 0;  // A_k
  double after[resolved_plan::max_stages + 1];
  after[S] = 0;
  for (int s = S - 1; s >= 0; --s)
    after[s] = after[s + 1] + t[s].forward_s + t[s].backward_s +
               (s + 1 < S ? t[s].send_forward_s + t[s + 1].send_backward_s : 0.0);
  double best = -1;
  for (int s = 0; s < S; ++s) {
    double period = t[s].forward_s + t[s].backward_s;
    if (!overlap) {
      period += t[s].send_forward_s + t[s].send_backward_s;
      // a synchronous receive holds the receiver for the transfer as well
      if (ctx.options().receiver_blocks) {
        if (s > 0) period += t[s - 1].send_forward_s;
        if (s + 1 < S) period += t[s + 1].send_backward_s;
      }
    } else {
      period = std::max({period, t[s].send_forward_s, t[s].send_backward_s});
    }
    period = std::max(period, loop[s]);
    const double downstream = after[s] - (t[s].forward_s + t[s].backward_s);  // R_k, transfers at k included
    const double warmup = (S - s - 1) * t[s].forward_s;                      // W_k
    const double stage_steady = (t[s].micro_batches - 1) * period;
    const double total = before + t[s].forward_s + t[s].backward_s + stage_steady + std::max(0.0, downstream - warmup);
    if (total > best) {
      best = total;
      out.bottleneck = s;
      steady = stage_steady;
    }
    if (s + 1 < S) before += t[s].forward_s + t[s].backward_s + t[s].send_forward_s + t[s + 1].send_backward_s;
  }
  out.round_trip_s = best - steady;
  out.steady_s = steady;
  out.pipeline_s = best;
  // Last backward end of stage s: E_0 = pipeline end; E_s = E_{s-1} - b_{s-1} - g_s.
  double end_of_backward = out.pipeline_s;
  double iteration = 0;
  for (int s = 0; s < S; ++s) {
    if (s > 0) end_of_backward -= t[s - 1].backward_s + t[s].send_backward_s;
    double done = end_of_backward + (overlap ? 0.0 : 0.0) + t[s].allreduce_s + t[s].update_s;
    if (s > 0 && !overlap) done += t[s].send_backward_s;
    iteration = std::max(iteration, done);
  }
  out.iteration_s = iteration;
  return out;
}

result<resolved_plan> resolve(const sim_context& ctx, const config::plan& p) {
  resolved_plan out;
  out.micro_batch = p.micro_batch;
  out.global_batch = p.global_batch;
  out.num_stages = p.num_stages();
  if (p.micro_batch <= 0) return error::invalid_input("micro_batch", "must be positive");
  if (p.global_batch <= 0) return error::invalid_input("global_batch", "must be positive");
  if (p.stages.empty()) return error::invalid_input("stages", "the plan has no stages");
  if (p.num_stages() > resolved_plan::max_stages)
    return error::invalid_input("stages", "more than 64 stages");
  const int L = ctx.num_layers();
  int next = 0;
  out.stages.resize(p.stages.size());
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    // Field names are built only for an error: the planner resolves millions of valid plans.
    const auto stage_field = [s] { return "stages[" + std::to_string(s) + "]"; };
    const auto field_of = [&](size_t r) {
      return stage_field() + ".replicas[" + std::to_string(r) + "]";
    };
    if (st.first_layer != next || st.num_layers <= 0)
      return error::invalid_input(stage_field() + ".first_layer",
                                  "layers must cover the model exactly once, in order: expected stage " +
                                      std::to_string(s) + " to start at layer " + std::to_string(next) +
                                      " with at least one layer, got first_layer " + std::to_string(st.first_layer) +
                                      " and " + std::to_string(st.num_layers) + " layers");
    next = st.end_layer();
    if (next > L)
      return error::invalid_input(stage_field() + ".num_layers",
                                  "ends at layer " + std::to_string(next) + " but the model has " + std::to_string(L) +
                                      " layers (0..L+1)");
    if (st.replicas.empty()) return error::invalid_input(stage_field() + ".replicas", "no replicas");
    if (st.replicas.size() > size_t(resolved_plan::max_replicas))
      return error::invalid_input(stage_field() + ".replicas",
                                  "more than " + std::to_string(resolved_plan::max_replicas) + " replicas");
    auto& rs = out.stages[s];
    rs.first = st.first_layer;
    rs.end = st.end_layer();
    rs.recompute = st.recompute;
    rs.num_replicas = static_cast<int>(st.replicas.size());
    rs.replicas.resize(rs.num_replicas);
    // Replicas of a stage mostly repeat the same GPU type, zone and TP degree: names are looked
    // up and the compute checked only when they change from the previous replica.
    const config::replica* previous = nullptr;
    for (size_t r = 0; r < st.replicas.size(); ++r) {
      const auto& rep = st.replicas[r];
      endpoint e;
      const bool same_gpu = previous && previous->gpu_type == rep.gpu_type;
      const bool same_zone = previous && previous->zone == rep.zone;
      e.gpu = same_gpu ? rs.replicas[r - 1].gpu : ctx.gpu_id(rep.gpu_type);
      e.zone = same_zone ? rs.replicas[r - 1].zone : ctx.zone_id(rep.zone);
      e.tp = rep.tp;
      if (e.gpu < 0)
        return error::not_found("", field_of(r) + ".gpu_type",
                                "GPU type '" + rep.gpu_type + "' has neither a profile nor a catalog entry");
      if (e.zone < 0)
        return error::not_found("", field_of(r) + ".zone",
                                "zone '" + rep.zone + "' is not known to the network");
      if (rep.tp <= 0 || (rep.tp & (rep.tp - 1)) != 0)
        return error::invalid_input(field_of(r) + ".tp", "TP degree must be a power of two");
      if (!(same_gpu && previous->tp == rep.tp) &&
          !ctx.compute(e.gpu, e.tp, p.micro_batch, rs.first, rs.end).ok)
        return error::not_found("", field_of(r),
                                "no profile and no catalog figures for GPU type '" + rep.gpu_type + "' at tp " +
                                    std::to_string(rep.tp) + ", micro-batch " + std::to_string(p.micro_batch));
      rs.replicas[r] = e;
      previous = &rep;
    }
  }
  if (next != L)
    return error::invalid_input("stages",
                                "layers must cover the model exactly once: the stages end at layer " + std::to_string(next) +
                                    " but the model has " + std::to_string(L) + " layers");
  if (auto bad = resolve_regions(p, out)) return *bad;
  // Links between consecutive stages and inside each stage's replica set.
  const double act = ctx.activation_bytes(p.micro_batch);
  for (int s = 0; s + 1 < out.num_stages; ++s) {
    std::optional<error> unlinked;  // the first pair without a link
    for_each_replica_pair(out.stages[s], out.stages[s + 1], [&](int, const endpoint& x, const endpoint& y) {
      if (!unlinked && (ctx.transfer_s(x, y, act) < 0 || ctx.transfer_s(y, x, act) < 0))
        unlinked = error::not_found("", "stages[" + std::to_string(s) + "]",
                                    "no link between (" + ctx.zone_name(x.zone) + ", " + ctx.gpu_name(x.gpu) +
                                        ") and (" + ctx.zone_name(y.zone) + ", " + ctx.gpu_name(y.gpu) + ")");
    });
    if (unlinked) return *unlinked;
  }
  for (int s = 0; s < out.num_stages; ++s) {
    const auto& st = out.stages[s];
    if (ctx.allreduce_s(st.replicas, st.num_replicas, ctx.params_per_gpu(1, st.first, st.end)) < 0)
      return error::not_found("", "stages[" + std::to_string(s) + "].replicas",
                              "no link between some of this stage's replicas for the gradient all-reduce");
  }
  return out;
}

estimate closed_form(const sim_context& ctx, const resolved_plan& p) {
  estimate q;
  stage_times t[resolved_plan::max_stages];
  const int S = p.num_stages;
  const pipeline_times pt = iteration_times(ctx, p, t);
  q.iteration_time_s = pt.iteration_s;
  q.pipeline_s = pt.pipeline_s;
  q.sync_and_update_s = pt.iteration_s - pt.pipeline_s;
  q.bottleneck_stage = pt.bottleneck;
  q.worst_memory_headroom_bytes = 1e300;
  const double act = ctx.activation_bytes(p.micro_batch);
  for (int s = 0; s < S; ++s) {
    const auto& st = p.stages[s];
    const int in_flight = std::min(S - s, t[s].micro_batches);
    double need = 0;
    for (int r = 0; r < st.num_replicas; ++r) {
      const endpoint& e = st.replicas[r];
      q.gpu_usd_per_hour += e.tp * ctx.usd_per_gpu_hour(e.gpu);
      if (r > 0 && same_kind(e, st.replicas[r - 1])) continue;  // same memory as the previous
      const double outer = outer_state_bytes(ctx, p, s, e.tp);
      need = ctx.stage_memory(e.gpu, e.tp, p.micro_batch, st.first, st.end, in_flight, st.recompute).total() + outer;
      q.peak_memory_bytes = std::max(q.peak_memory_bytes, need);
      // Admitted only when Sailor's formula fits it too (sim_options::sailor_memory_check).
      const double sailor =
          ctx.options().sailor_memory_check
              ? ctx.sailor_stage_memory(e.tp, p.micro_batch, st.first, st.end, in_flight, st.recompute) + outer
              : 0.0;
      const double cap = ctx.gpu_memory_bytes(e.gpu);
      const double headroom = cap > 0 ? cap - std::max(need, sailor) : 1e300;
      if (headroom < q.worst_memory_headroom_bytes) {
        q.worst_memory_headroom_bytes = headroom;
        q.worst_memory_stage = s;
        q.worst_memory_replica = r;
        q.worst_memory_by_sailor_check = sailor > need;
      }
    }
    // Egress: activations forward and gradients back, every micro-batch: one copy when the TP
    // ranks send parts of it, else one per receiving TP rank.
    if (s + 1 < S) {
      for_each_replica_pair(st, p.stages[s + 1], [&](int, const endpoint& x, const endpoint& y) {
        if (x.zone == y.zone) return;
        const double price = ctx.egress_usd_per_gb(x.zone, y.zone) + ctx.egress_usd_per_gb(y.zone, x.zone);
        if (price > 0) q.egress_usd_per_iteration += price * act * p2p_copies(ctx, x, y) * t[s].micro_batches / 1e9;
      });
    }
    q.egress_usd_per_iteration += sync_egress_usd(ctx, p, s);
  }
  if (p.inner_steps > 0) {
    const outer_exchange x = outer_exchange_of(ctx, p, t, pt.iteration_s);
    q.inner_iteration_s = pt.iteration_s;
    q.outer_exchange_s = x.exchange_s;
    q.outer_exposed_s = x.exposed_s;
    q.outer_egress_usd_per_iteration = x.egress_usd;
    q.iteration_time_s += x.exposed_s;
    q.sync_and_update_s += x.exposed_s;
    q.egress_usd_per_iteration += x.egress_usd;
  }
  q.cost_per_iteration_usd = q.gpu_usd_per_hour * q.iteration_time_s / 3600.0 + q.egress_usd_per_iteration;
  q.fits_memory = q.worst_memory_headroom_bytes >= 0;
  q.throughput_iters_per_s = q.iteration_time_s > 0 ? 1.0 / q.iteration_time_s : 0;
  q.tokens_per_s = q.throughput_iters_per_s * double(p.global_batch) * ctx.model().sequence;
  q.cost_per_hour_usd = q.iteration_time_s > 0 ? q.cost_per_iteration_usd * 3600.0 / q.iteration_time_s : 0;
  return q;
}

config::plan_estimate estimate::summary() const {
  config::plan_estimate out = *this;
  out.notes.clear();  // kept by whoever needs them (actors::estimate_notes)
  return out;
}

const gpu_memory* estimate::fullest_replica(int stage) const {
  const gpu_memory* best = nullptr;
  for (const auto& g : memory) {
    if (g.stage != stage) continue;
    if (!best || best->capacity_bytes <= 0 ||
        g.bytes.total() / std::max(g.capacity_bytes, 1.0) >
            best->bytes.total() / std::max(best->capacity_bytes, 1.0))
      best = &g;
  }
  return best;
}

namespace {

// Why a plan does not fit: the worst replica by either memory check, what it needs and has.
std::string out_of_memory_verdict(const sim_context& ctx, const config::plan& plan, const estimate& q) {
  const auto& st = plan.stages[q.worst_memory_stage];
  const auto& rep = st.replicas[q.worst_memory_replica];
  const double capacity = ctx.gpu_memory_bytes(ctx.gpu_id(rep.gpu_type));
  return std::string(q.worst_memory_by_sailor_check ? "out of memory by Sailor's formula: " : "out of memory: ") +
         "stage " + std::to_string(q.worst_memory_stage) + " replica " + std::to_string(q.worst_memory_replica) +
         " (" + rep.gpu_type + " in " + rep.zone + ", tp " + std::to_string(rep.tp) + ") needs " +
         fmt_gb(capacity - q.worst_memory_headroom_bytes) + " of " + fmt_gb(capacity) + ", over by " +
         fmt_gb(-q.worst_memory_headroom_bytes);
}

// Bytes that cross zones per iteration (for the report; the cost is priced per link in
// closed_form): activations and gradients between stages, and the all-reduce of stages whose
// replicas span zones.
double egress_bytes(const sim_context& ctx, const resolved_plan& p, const std::vector<stage_times>& t) {
  const int S = p.num_stages;
  double bytes = 0;
  const double act = ctx.activation_bytes(p.micro_batch);
  for (int s = 0; s + 1 < S; ++s)
    for_each_replica_pair(p.stages[s], p.stages[s + 1], [&](int, const endpoint& x, const endpoint& y) {
      if (x.zone != y.zone) bytes += 2.0 * act * p2p_copies(ctx, x, y) * t[s].micro_batches;
    });
  for (int s = 0; s < S; ++s) {
    // Under DiLoCo each region's replicas all-reduce among themselves every iteration.
    for (int region = p.inner_steps > 0 ? 0 : -1; region < (p.inner_steps > 0 ? p.num_regions : 0); ++region) {
      int n = 0;
      const endpoint* group = replicas_in(p.stages[s], region, n);
      bool zones = false;
      for (int r = 1; r < n; ++r) zones = zones || group[r].zone != group[0].zone;
      if (zones)
        bytes += 2.0 * (n - 1) / n * ctx.params_per_gpu(1, p.stages[s].first, p.stages[s].end) *
                 ctx.options().grad_bytes_per_param * 2;  // at least two zone crossings in the ring
    }
  }
  return bytes + outer_exchange_of(ctx, p, t.data(), 0.0).egress_bytes;
}

// A note per GPU type of the plan whose times come from the catalog's peak, not a profile.
std::vector<std::string> analytic_notes(const sim_context& ctx, const resolved_plan& p) {
  std::vector<std::string> notes;
  for (int g = 0; g < ctx.num_gpu_types(); ++g) {
    bool used = false, analytic = false;
    for (int s = 0; s < p.num_stages; ++s)
      for (int r = 0; r < p.stages[s].num_replicas; ++r)
        if (p.stages[s].replicas[r].gpu == g) {
          used = true;
          analytic = analytic || ctx.compute(g, p.stages[s].replicas[r].tp, p.micro_batch, p.stages[s].first,
                                             p.stages[s].end).analytic;
        }
    if (used && analytic)
      notes.push_back("GPU type " + ctx.gpu_name(g) +
                      ": no profile for this model at this TP/micro-batch; times from the catalog's peak "
                      "FLOP/s x efficiency " + std::to_string(ctx.options().analytic_efficiency));
  }
  return notes;
}

}  // namespace

result<estimate> simulate(const sim_context& ctx, const config::plan& plan) {
  auto rp = resolve(ctx, plan);
  if (!rp) return rp.error();
  const resolved_plan& p = *rp;
  const int S = p.num_stages;
  std::vector<stage_times> t(S);
  const pipeline_times pt = iteration_times(ctx, p, t.data());
  estimate e = closed_form(ctx, p);
  e.warmup_drain_s = pt.round_trip_s;
  e.steady_s = pt.steady_s;
  e.our_check_headroom_bytes = e.sailor_check_headroom_bytes = 1e300;
  for (int s = 0; s < S; ++s) {
    stage_estimate se;
    se.first_layer = p.stages[s].first;
    se.end_layer = p.stages[s].end;
    se.forward_s = t[s].forward_s;
    se.backward_s = t[s].backward_s;
    se.update_s = t[s].update_s;
    se.send_forward_s = t[s].send_forward_s;
    se.send_backward_s = t[s].send_backward_s;
    se.allreduce_s = t[s].allreduce_s;
    se.micro_batches = t[s].micro_batches;
    se.slowest_replica = t[s].slowest;
    se.analytic = t[s].analytic;
    e.stages.push_back(se);
    const int in_flight = std::min(S - s, t[s].micro_batches);
    for (int r = 0; r < p.stages[s].num_replicas; ++r) {
      const endpoint& ep = p.stages[s].replicas[r];
      gpu_memory gm;
      gm.stage = s;
      gm.replica = r;
      gm.gpu_type = ctx.gpu_name(ep.gpu);
      gm.zone = ctx.zone_name(ep.zone);
      gm.tp = ep.tp;
      gm.bytes = ctx.stage_memory(ep.gpu, ep.tp, p.micro_batch, p.stages[s].first, p.stages[s].end, in_flight,
                                  p.stages[s].recompute);
      const double outer = outer_state_bytes(ctx, p, s, ep.tp);
      gm.bytes.optimizer_states += outer;  // DiLoCo's snapshot and outer momentum
      gm.capacity_bytes = ctx.gpu_memory_bytes(ep.gpu);
      if (ctx.options().sailor_memory_check)
        gm.sailor_check_bytes = ctx.sailor_stage_memory(ep.tp, p.micro_batch, p.stages[s].first, p.stages[s].end,
                                                        in_flight, p.stages[s].recompute) + outer;
      if (gm.capacity_bytes > 0) {
        const double ours = gm.capacity_bytes - gm.bytes.total();
        const double theirs = gm.capacity_bytes - gm.sailor_check_bytes;
        e.our_check_headroom_bytes = std::min(e.our_check_headroom_bytes, ours);
        e.sailor_check_headroom_bytes = std::min(e.sailor_check_headroom_bytes, theirs);
      }
      e.memory.push_back(gm);
    }
  }
  if (e.our_check_headroom_bytes >= 1e300) e.our_check_headroom_bytes = 0;  // no capacity known
  if (e.sailor_check_headroom_bytes >= 1e300 || !ctx.options().sailor_memory_check) e.sailor_check_headroom_bytes = 0;
  e.memory_verdict = e.fits_memory ? "fits" : out_of_memory_verdict(ctx, plan, e);
  e.cost_per_hour_usd = e.cost_per_iteration_usd * e.throughput_iters_per_s * 3600.0;
  e.egress_bytes_per_iteration = egress_bytes(ctx, p, t);
  e.notes = analytic_notes(ctx, p);
  return e;
}

}  // namespace sailor::simulator
