#include "sailor/planner/spot_replay.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace sailor::planner {

const char* to_string(spot_policy p) {
  switch (p) {
    case spot_policy::ours: return "ours";
    case spot_policy::restart_from_checkpoint: return "restart_from_checkpoint";
    case spot_policy::static_plan: return "static";
    case spot_policy::on_demand: return "on_demand";
  }
  return "?";
}

const char* to_string(spot_objective o) { return o == spot_objective::liveput ? "liveput" : "throughput"; }

// ---- preemption history ----------------------------------------------------------------

preemption_history::preemption_history(size_t columns) : crossings_(columns), last_(columns, -1) {}

void preemption_history::observe(const std::vector<int>& counts, double elapsed_s) {
  seen_s_ += elapsed_s;
  for (size_t c = 0; c < counts.size() && c < last_.size(); ++c) {
    if (last_[c] >= 0)
      for (int level = counts[c] + 1; level <= last_[c]; ++level) ++crossings_[c][level];
    last_[c] = counts[c];
  }
}

double preemption_history::crossing_rate(size_t column, int level) const {
  // A prior of one fall per 12 hours, weighed as 12 hours of history: a trace with no falls
  // yet is not taken as one that never falls.
  constexpr double prior_s = 12 * 3600.0;
  int n = 0;
  if (column < crossings_.size())
    if (auto it = crossings_[column].find(level); it != crossings_[column].end()) n = it->second;
  return (n + 1.0) / (seen_s_ + prior_s);
}

// ---- the replay ------------------------------------------------------------------------

namespace {

// The new plan's price and summary on the change just recorded.
void describe(std::vector<replay_change>& changes, const spot_replayer::entry* next) {
  if (changes.empty() || !next) return;
  changes.back().usd_per_hour_after = next->gpu_usd_per_s * 3600;
  changes.back().plan_after = summary(next->plan);
}

}  // namespace

struct spot_replayer::state {
  const entry* cur = nullptr;
  std::vector<int> held;
  double busy_until_s = 0;
  double since_checkpoint_s = 0;  ///< training since the newest checkpoint
  replay_totals totals;
  preemption_history history;
  explicit state(size_t columns) : held(columns, 0), history(columns) {}
};

spot_replayer::spot_replayer(problem prob, availability_timeline timeline, recovery_model rec, options opts)
    : prob_(std::move(prob)), timeline_(std::move(timeline)), rec_(rec), opts_(std::move(opts)) {}

void spot_replayer::set_plan_source(plan_source source) {
  source_ = std::move(source);
  cache_.clear();
}

void spot_replayer::set_recovery(const recovery_model& rec) {
  if (rec.state_bytes_per_param != rec_.state_bytes_per_param) cache_.clear();  // shard sizes change
  rec_ = rec;
}

bool spot_replayer::without_notice(int tick) const {
  if (rec_.no_notice_fraction <= 0) return false;
  if (rec_.no_notice_fraction >= 1) return true;
  // A low-discrepancy sequence: the fraction holds over any stretch of the trace, and every
  // policy sees the same ticks without notice.
  const double x = std::fmod((tick + 1) * 0.6180339887498949, 1.0);
  return x < rec_.no_notice_fraction;
}

const spot_replayer::entry& spot_replayer::plan_for(const std::vector<int>& counts, bool on_demand) {
  auto key = std::make_pair(on_demand, counts);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  entry e;
  e.held.assign(timeline_.columns.size(), 0);
  availability avail;
  for (size_t c = 0; c < counts.size(); ++c)
    if (counts[c] > 0) avail[timeline_.columns[c].gpu_type][timeline_.columns[c].zone] += counts[c];
  if (avail.empty()) {
    e.why = "no GPUs are available";
    return cache_.emplace(key, std::move(e)).first->second;
  }
  problem p = prob_;
  p.cluster = with_availability(p.cluster, avail);
  p.cluster.use_spot_prices = !on_demand;
  ++planner_calls_;
  auto r = source_ ? source_(p) : plan_job(p, opts_);
  if (!r) {
    e.why = r.error().to_string();
    return cache_.emplace(key, std::move(e)).first->second;
  }
  planner_s_ += r->search_s;
  e.ok = true;
  e.plan = r->plan;
  e.search_s = r->search_s;
  e.throughput = r->plan.estimate->throughput_iters_per_s;
  for (const auto& st : e.plan.stages) {
    double params = 0;
    for (int l = st.first_layer; l < st.end_layer(); ++l) params += double(prob_.model.params_of_layer(l));
    for (const auto& x : st.replicas) {
      e.gpu_usd_per_s += x.tp * p.cluster.usd_per_gpu_hour(x.gpu_type) / 3600.0;
      e.state_per_gpu_bytes = std::max(e.state_per_gpu_bytes, params / x.tp * rec_.state_bytes_per_param);
      for (size_t c = 0; c < timeline_.columns.size(); ++c)
        if (timeline_.columns[c].gpu_type == x.gpu_type && timeline_.columns[c].zone == x.zone) e.held[c] += x.tp;
    }
  }
  if (e.throughput > 0)
    e.egress_usd_per_iteration = std::max(0.0, r->plan.estimate->cost_per_iteration_usd - e.gpu_usd_per_s / e.throughput);
  return cache_.emplace(key, std::move(e)).first->second;
}

double spot_replayer::planning_s(const entry& e) const { return rec_.planning_s >= 0 ? rec_.planning_s : e.search_s; }

// Each GPU of the new plan that lacks its shard pulls it from a holder, all in parallel: the
// largest shard over the per-GPU bandwidth. Nothing moves when the new plan keeps every
// (layer, GPU type, zone) the old one held.
double spot_replayer::transfer_s(const entry& from, const entry& to) const {
  if (state_kept(prob_, from.plan, to.plan) >= 1.0 - 1e-9) return 0;
  return to.state_per_gpu_bytes / (rec_.transfer_gbytes_per_s * 1e9);
}

// Expected iterations/s under preemption: the plan is stopped by a fall of any column it uses
// below what it holds, at the rate seen so far, for about the recovery time each time, and
// loses the work since the newest checkpoint (half an interval on average) when the fall comes
// without notice and a stage has all its replicas in one column (one zone's fall, frequent in
// the traces, can take them all).
double spot_replayer::liveput(const entry& e, const std::vector<int>& counts, const preemption_history& h) const {
  (void)counts;
  double rate = 0;
  for (size_t c = 0; c < e.held.size(); ++c)
    if (e.held[c] > 0) rate += h.crossing_rate(c, e.held[c]);
  bool exposed = false;
  for (const auto& st : e.plan.stages) {
    bool one_column = true;
    for (const auto& x : st.replicas)
      one_column = one_column && x.zone == st.replicas.front().zone && x.gpu_type == st.replicas.front().gpu_type;
    exposed = exposed || one_column;
  }
  const double f = std::clamp(rec_.no_notice_fraction, 0.0, 1.0);
  const double xfer = e.state_per_gpu_bytes / (rec_.transfer_gbytes_per_s * 1e9);
  const double redo_s = exposed ? rec_.checkpoint_interval_s / 2 : 0.0;
  const double down = rec_.restart_s + f * (rec_.detection_s + planning_s(e) + xfer) +
                      (1 - f) * std::max(0.0, planning_s(e) + xfer - rec_.notice_s) +
                      f * 0.5 / std::max(e.throughput, 1e-12) +  // the iteration in flight
                      f * redo_s;
  return e.throughput / (1.0 + rate * down);
}

const spot_replayer::entry* spot_replayer::choose(const std::vector<int>& counts, spot_objective objective,
                                                  const preemption_history& h) {
  const entry& full = plan_for(counts);
  if (objective == spot_objective::throughput) return full.ok ? &full : nullptr;
  // Candidates: everything, and for each column some held back (a spare that absorbs small
  // falls) or none of it (a zone whose capacity falls often left out).
  std::vector<std::vector<int>> variants{counts};
  for (size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] == 0) continue;
    for (int keep : {counts[c] - 1, counts[c] / 2, 0}) {
      auto v = counts;
      v[c] = std::max(0, keep);
      if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
    }
  }
  const entry* best = nullptr;
  double best_score = 0;
  const bool min_cost = prob_.job.goal == config::objective::min_cost;
  for (const auto& v : variants) {
    const entry& e = plan_for(v);
    if (!e.ok) continue;
    const double live = liveput(e, counts, h);
    if (live <= 0) continue;
    const double usd_per_iteration = (e.gpu_usd_per_s + e.egress_usd_per_iteration * live) / live;
    const double score = min_cost ? -usd_per_iteration : live;
    if (!best || score > best_score + 1e-12 * std::abs(best_score)) {
      best = &e;
      best_score = score;
    }
  }
  return best;
}

bool every_node_gone(const std::vector<int>& held, const std::vector<int>& counts) {
  for (size_t c = 0; c < held.size() && c < counts.size(); ++c)
    if (held[c] > 0 && counts[c] > 0) return false;
  return true;
}

bool survivors_hold_every_layer(const config::plan& plan, const std::vector<trace_column>& columns,
                                const std::vector<int>& held, const std::vector<int>& counts) {
  std::vector<int> to_lose(held.size(), 0);
  for (size_t c = 0; c < held.size(); ++c) to_lose[c] = std::max(0, held[c] - counts[c]);
  for (auto st = plan.stages.rbegin(); st != plan.stages.rend(); ++st) {
    int alive = 0;
    for (auto x = st->replicas.rbegin(); x != st->replicas.rend(); ++x) {
      bool lost = false;
      for (size_t c = 0; c < columns.size(); ++c)
        if (columns[c].gpu_type == x->gpu_type && columns[c].zone == x->zone && to_lose[c] > 0) {
          to_lose[c] -= x->tp;
          lost = true;
          break;
        }
      if (!lost) ++alive;
    }
    if (alive == 0) return false;
  }
  return true;
}

void spot_replayer::handle_preemption(state& s, int tick, spot_policy policy, spot_objective objective) {
  const auto& counts = timeline_.counts[tick];
  const double t0 = timeline_.start_s[tick];
  const bool nn = without_notice(tick);
  ++(nn ? s.totals.preemptions_without_notice : s.totals.preemptions_with_notice);
  const entry* old = s.cur;
  const double bw = rec_.transfer_gbytes_per_s * 1e9;
  // Each leaving GPU hands its shard over (ours) or writes it (a checkpoint at the notice).
  const bool saved_in_notice = !nn && old->state_per_gpu_bytes / bw <= rec_.notice_s;
  bool rollback = false;
  double lost = 0;
  if (policy == spot_policy::ours) {
    rollback = nn ? !survivors_hold_every_layer(old->plan, timeline_.columns, s.held, counts) : !saved_in_notice;
    lost = rollback ? old->throughput * s.since_checkpoint_s : (nn ? 0.5 : 0.0);  // nn: the iteration in flight
    if (!rec_.checkpoints_outlive_nodes && every_node_gone(s.held, counts))
      lost = s.totals.iterations;  // the checkpoint and its copies left with the nodes
  } else {
    rollback = !saved_in_notice;
    lost = rollback ? old->throughput * s.since_checkpoint_s : 0.0;
  }
  lost = std::min(lost, s.totals.iterations);
  s.totals.iterations -= lost;
  s.totals.lost_iterations += lost;
  if (rollback || policy != spot_policy::ours) s.since_checkpoint_s = 0;

  const entry* next = nullptr;
  if (policy == spot_policy::ours) next = choose(counts, objective, s.history);
  else if (policy == spot_policy::restart_from_checkpoint && plan_for(counts).ok) next = &plan_for(counts);
  double down = 0;
  if (next) {
    const double plan_t = planning_s(*next);
    if (policy == spot_policy::ours) {
      const double xfer = rollback ? next->state_per_gpu_bytes / bw : transfer_s(*old, *next);
      down = nn ? rec_.detection_s + plan_t + rec_.restart_s + xfer
                : rec_.restart_s + std::max(0.0, plan_t + xfer - rec_.notice_s);
    } else {
      const double load = next->state_per_gpu_bytes / bw;  // every GPU reads its shard of the checkpoint
      down = (nn ? rec_.detection_s + plan_t : std::max(0.0, plan_t - rec_.notice_s)) + rec_.baseline_restart_s + load;
    }
  }
  s.totals.changes.push_back({t0, nn ? "preemption (no notice)" : "preemption (notice)", old->plan.total_gpus(),
                              next ? next->plan.total_gpus() : 0, next ? next->throughput : 0.0, down, lost, 0.0, {}});
  describe(s.totals.changes, next);
  ++s.totals.replans;
  s.cur = next;
  s.held = next ? next->held : std::vector<int>(counts.size(), 0);
  s.busy_until_s = t0 + down;
}

void spot_replayer::handle_growth(state& s, int tick, spot_policy policy, spot_objective objective) {
  const auto& counts = timeline_.counts[tick];
  const double t0 = timeline_.start_s[tick];
  const double bw = rec_.transfer_gbytes_per_s * 1e9;
  const entry* next = nullptr;
  double down = 0;
  std::string why = "growth";
  if (!s.cur) {
    // Waiting: start as soon as a plan exists (static: as soon as its GPUs are all back).
    if (policy == spot_policy::static_plan) {
      const entry& first = plan_for(timeline_.counts[0]);
      if (!first.ok) return;
      for (size_t c = 0; c < counts.size(); ++c)
        if (counts[c] < first.held[c]) return;
      next = &first;
    } else {
      next = policy == spot_policy::ours ? choose(counts, objective, s.history)
                                         : (plan_for(counts).ok ? &plan_for(counts) : nullptr);
    }
    if (!next) return;
    const double restart = policy == spot_policy::ours ? rec_.restart_s : rec_.baseline_restart_s;
    const double plan_t = policy == spot_policy::static_plan ? 0.0 : planning_s(*next);
    down = plan_t + restart + next->state_per_gpu_bytes / bw;  // from the newest checkpoint
    why = "capacity back";
  } else if (policy == spot_policy::static_plan) {
    return;
  } else if (policy == spot_policy::restart_from_checkpoint) {
    const entry& e = plan_for(counts);
    if (!e.ok || &e == s.cur || (!grow_on_every_rise_ && e.throughput <= s.cur->throughput * (1 + 1e-6))) return;
    next = &e;  // a checkpoint at the switch, then a full restart (planning overlaps training)
    down = rec_.baseline_restart_s + e.state_per_gpu_bytes / bw;
    s.since_checkpoint_s = 0;
  } else {
    const entry* e = choose(counts, objective, s.history);
    if (!e || e == s.cur) return;
    const double switch_s = rec_.restart_s + transfer_s(*s.cur, *e);  // planning overlaps training
    if (objective == spot_objective::throughput) {
      if (!grow_on_every_rise_ && e->throughput <= s.cur->throughput * (1 + 1e-6)) return;
    } else {
      // Grow only when the expected gain until the next fall pays for the stop.
      const double now = liveput(*s.cur, counts, s.history), then = liveput(*e, counts, s.history);
      double rate = 0;
      for (size_t c = 0; c < e->held.size(); ++c)
        if (e->held[c] > 0) rate += s.history.crossing_rate(c, e->held[c]);
      const double horizon = rate > 0 ? 1.0 / rate : 1e9;
      if ((then - now) * horizon <= then * switch_s) return;
    }
    next = e;
    down = switch_s;
  }
  s.totals.changes.push_back({t0, why, s.cur ? s.cur->plan.total_gpus() : 0, next->plan.total_gpus(),
                              next->throughput, down, 0.0, 0.0, {}});
  describe(s.totals.changes, next);
  ++s.totals.replans;
  s.cur = next;
  s.held = next->held;
  s.busy_until_s = t0 + down;
}

replay_totals spot_replayer::run(spot_policy policy, spot_objective objective) {
  const size_t columns = timeline_.columns.size();
  replay_totals out;
  out.span_s = timeline_.end_s;
  if (timeline_.ticks() == 0) return out;
  if (policy == spot_policy::on_demand) {
    std::vector<int> peak(columns, 0);
    for (const auto& row : timeline_.counts)
      for (size_t c = 0; c < columns; ++c) peak[c] = std::max(peak[c], row[c]);
    const entry& e = plan_for(peak, true);
    out.waiting_s = out.span_s;
    if (!e.ok) return out;
    out.waiting_s = 0;
    out.training_s = out.span_s;
    out.iterations = e.throughput * out.span_s;
    if (target_iterations_ > 0 && out.iterations >= target_iterations_) out.time_to_target_s = target_iterations_ / e.throughput;
    out.dollars = (e.gpu_usd_per_s + e.egress_usd_per_iteration * e.throughput) * out.span_s;
    out.gpu_hours = e.plan.total_gpus() * out.span_s / 3600.0;
    out.changes.push_back({0, "start", 0, e.plan.total_gpus(), e.throughput, 0, 0, 0, {}});
    describe(out.changes, &e);
    return out;
  }
  state s(columns);
  for (int i = 0; i < timeline_.ticks(); ++i) {
    const auto& counts = timeline_.counts[i];
    const double t0 = timeline_.start_s[i], d = timeline_.duration_s(i);
    s.history.observe(counts, i == 0 ? 0.0 : t0 - timeline_.start_s[i - 1]);
    if (i == 0) {
      s.cur = policy == spot_policy::ours ? choose(counts, objective, s.history)
                                          : (plan_for(counts).ok ? &plan_for(counts) : nullptr);
      if (s.cur) {
        s.held = s.cur->held;
        s.totals.changes.push_back({0, "start", 0, s.cur->plan.total_gpus(), s.cur->throughput, 0, 0, 0, {}});
        describe(s.totals.changes, s.cur);
      }
    } else {
      bool hit = false;
      for (size_t c = 0; s.cur && c < columns; ++c) hit = hit || counts[c] < s.held[c];
      if (hit) handle_preemption(s, i, policy, objective);
      else if (!s.cur || counts != timeline_.counts[i - 1]) handle_growth(s, i, policy, objective);
    }
    if (!s.cur) {
      s.totals.waiting_s += d;
      continue;
    }
    const double r = std::clamp(s.busy_until_s - t0, 0.0, d), train = d - r;
    const double before = s.totals.iterations;
    s.totals.iterations += s.cur->throughput * train;
    if (target_iterations_ > 0 && s.totals.time_to_target_s < 0 && s.totals.iterations >= target_iterations_)
      s.totals.time_to_target_s = t0 + r + (target_iterations_ - before) / s.cur->throughput;
    s.totals.training_s += train;
    s.totals.recovery_s_total += r;
    s.since_checkpoint_s = std::fmod(s.since_checkpoint_s + train, std::max(rec_.checkpoint_interval_s, 1e-9));
    s.totals.dollars += s.cur->gpu_usd_per_s * d + s.cur->egress_usd_per_iteration * s.cur->throughput * train;
    int gpus = 0;
    for (int h : s.held) gpus += h;
    s.totals.gpu_hours += gpus * d / 3600.0;
  }
  s.totals.span_s = timeline_.end_s;
  return s.totals;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(replay_change, at_s, why, gpus_before, gpus_after, throughput_after,
                                   usd_per_hour_after, downtime_s, lost_iterations, plan_after)
// The totals every summary has, each under its own name; totals_json adds the ratio and the
// fields written only when they say something (time_to_target_s, changes).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(replay_totals, iterations, dollars, lost_iterations, recovery_s_total,
                                   training_s, waiting_s, span_s, gpu_hours, replans,
                                   preemptions_with_notice, preemptions_without_notice)

std::string totals_json(const replay_totals& t, bool with_changes) {
  nlohmann::json j = t;
  j["iterations_per_dollar"] = t.iterations_per_dollar();
  if (t.time_to_target_s >= 0) j["time_to_target_s"] = t.time_to_target_s;
  if (with_changes) j["changes"] = t.changes;
  return j.dump();
}

}  // namespace sailor::planner
