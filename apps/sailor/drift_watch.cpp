#include "drift_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "live_slow_nodes.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/simulator/correction.hpp"

namespace sailor::app {
namespace {

using simulator::median_of;

// "layers [a, b) of N" for the stages `node` runs.
std::string share_text(const config::plan& p, const std::string& node) {
  std::string out;
  int total = 0;
  for (const auto& stage : p.stages) {
    total += stage.num_layers;
    for (const auto& r : stage.replicas)
      if (std::find(r.nodes.begin(), r.nodes.end(), node) != r.nodes.end()) {
        out += (out.empty() ? "" : ", ") + std::string("[") + std::to_string(stage.first_layer) +
               ", " + std::to_string(stage.first_layer + stage.num_layers) + ")";
        break;
      }
  }
  return "layers " + out + " of " + std::to_string(total);
}

// The same stages, layers, micro-batch and replicas (type, zone, TP) in the same order: the
// nodes a plan is placed on aside.
bool same_shape(const config::plan& a, const config::plan& b) {
  if (a.micro_batch != b.micro_batch || a.stages.size() != b.stages.size())
    return false;
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    const auto &x = a.stages[s], &y = b.stages[s];
    if (x.first_layer != y.first_layer || x.num_layers != y.num_layers ||
        x.recompute != y.recompute || x.replicas.size() != y.replicas.size())
      return false;
    for (std::size_t r = 0; r < x.replicas.size(); ++r)
      if (x.replicas[r].gpu_type != y.replicas[r].gpu_type ||
          x.replicas[r].zone != y.replicas[r].zone || x.replicas[r].tp != y.replicas[r].tp)
        return false;
  }
  return true;
}

// Same shape and every replica on the same nodes: a re-plan to `a` while `b` runs changes
// nothing.
bool same_placement(const config::plan& a, const config::plan& b) {
  if (!same_shape(a, b))
    return false;
  for (std::size_t s = 0; s < a.stages.size(); ++s)
    for (std::size_t r = 0; r < a.stages[s].replicas.size(); ++r)
      if (a.stages[s].replicas[r].nodes != b.stages[s].replicas[r].nodes)
        return false;
  return true;
}

}  // namespace

void node_speeds::add(const std::string& node, double compute_s, double predicted_compute_s,
                      std::int64_t iteration) {
  if (!std::isfinite(compute_s) || !std::isfinite(predicted_compute_s) || compute_s <= 0 ||
      predicted_compute_s <= 0)
    return;
  const double ratio = compute_s / predicted_compute_s;
  auto& rs = ratios_[node];
  // A thousand times its own normal figure is a broken clock, not a slow node.
  if (rs.size() >= 3) {
    const double ref = median_of(rs);
    if (ratio > 1000 * ref || ratio * 1000 < ref)
      return;
  }
  rs.push_back(ratio);
  iterations_[node].push_back(iteration);
}

std::int64_t node_speeds::slow_since(const std::string& node, const drift_options& o) const {
  auto it = ratios_.find(node);
  const auto base = static_cast<std::size_t>(std::max(1, o.baseline));
  if (it == ratios_.end() || it->second.size() <= base)
    return -1;
  const auto& rs = it->second;
  const auto& at = iterations_.at(node);
  const double before = median_of({rs.begin(), rs.begin() + static_cast<long>(base)});
  std::int64_t since = -1;
  for (std::size_t k = rs.size(); k-- > base && rs[k] > 1.25 * before;)
    since = at[k];
  return since;
}

double node_speeds::slowdown(const std::string& node, const drift_options& o) const {
  auto it = ratios_.find(node);
  if (it == ratios_.end())
    return 1;
  const auto& rs = it->second;
  const auto base = static_cast<std::size_t>(std::max(1, o.baseline));
  const auto win = static_cast<std::size_t>(std::max(1, o.window));
  if (rs.size() < base + win)
    return 1;
  const double before = median_of({rs.begin(), rs.begin() + static_cast<long>(base)});
  const double now = median_of({rs.end() - static_cast<long>(win), rs.end()});
  return before > 0 ? now / before : 1;
}

std::optional<std::pair<std::string, double>> node_speeds::straggler(
  const drift_options& o, const std::set<std::string>& left_out) const {
  std::vector<std::pair<double, std::string>> by_slowdown;
  for (const auto& [node, rs] : ratios_)
    if (!left_out.count(node))
      by_slowdown.emplace_back(slowdown(node, o), node);
  if (by_slowdown.empty())
    return std::nullopt;
  std::sort(by_slowdown.rbegin(), by_slowdown.rend());
  const auto& [worst, node] = by_slowdown.front();
  std::vector<double> peers;
  for (std::size_t k = 1; k < by_slowdown.size(); ++k)
    peers.push_back(by_slowdown[k].first);
  const double peer = peers.empty() ? 1.0 : median_of(peers);
  if (worst > o.slow_factor && worst > o.slow_factor * peer)
    return std::make_pair(node, worst);
  return std::nullopt;
}

std::optional<std::string> drift_watch::check(const std::vector<actors::board_rank_report>& reports,
                                              const plan_prediction& running,
                                              std::int64_t plan_version,
                                              const std::vector<actors::iteration_record>& records,
                                              int left, const std::set<std::string>& gone,
                                              const std::optional<config::plan>& current) {
  for (const auto& b : reports) {
    const auto& r = b.report;
    if (r.plan_version != plan_version || r.stage < 0 ||
        r.stage >= static_cast<int>(running.stages.size()))
      continue;
    if (!seen_.insert({r.plan_version, r.node, r.rank, r.iteration}).second)
      continue;
    speeds_.add(r.node, r.compute_s, running.stages[static_cast<std::size_t>(r.stage)].compute_s,
                r.iteration);
    if (loop_ && current)
      observe_link(r, running, *current);
  }
  const auto done = static_cast<std::int64_t>(records.size());
  if (done == last_checked_ || done - last_replan_iteration_ < options_.cooldown)
    return std::nullopt;
  last_checked_ = done;
  std::set<std::string> left_out;
  if (loop_) {
    std::lock_guard lock{loop_->mu};
    left_out = loop_->excluded;
  }
  auto slow = speeds_.straggler(options_, left_out);
  // A link that drifted explains the slowness of the nodes it joins (their backward waits in
  // the overlapped all-reduce): no straggler is judged, nor are samples held back as a
  // suspect's, until a plan predicted on the corrected link runs.
  if (slow && link_drifted(running))
    slow.reset();
  if (loop_) {
    std::lock_guard lock{loop_->mu};
    // The iterations since the node slowed down measured the node, not its type: out of the
    // type's correction, or the plans around it would be predicted as slow as it is.
    if (slow && !loop_->suspect)
      if (const auto since = speeds_.slow_since(slow->first, options_); since >= 0)
        if (auto n = loop_->correction.forget_from(loop_->bottleneck_type, since))
          std::fprintf(stderr, "  closed loop: %zu iterations from %lld on left out of the %s "
                               "correction (%s slowed down)\n",
                       n, static_cast<long long>(since + 1), loop_->bottleneck_type.c_str(),
                       slow->first.c_str());
    loop_->suspect = slow.has_value();
    if (slow && loop_->excluded.count(slow->first))
      return std::nullopt;
  }
  if (!slow) {
    auto why = link_drift(running, records, left, gone, current);
    if (why)
      last_replan_iteration_ = done;
    return why;
  }
  if (running.planner == "fixed" || records.size() < static_cast<std::size_t>(options_.window) ||
      left <= 0)
    return std::nullopt;
  std::vector<double> recent;
  for (auto it = records.end() - options_.window; it != records.end(); ++it)
    recent.push_back(it->measured_s);
  const double measured = median_of(recent);
  auto choice = best_around(*slow, gone, current);
  if (!choice) {
    std::fprintf(stderr, "  warning: %s is %.1fx slower, but no plan around it: %s\n",
                 slow->first.c_str(), slow->second, choice.error().message.c_str());
    last_replan_iteration_ = done;  // not again at once
    return std::nullopt;
  }
  // The plan around it is the running one (the slow node is all there is, or the search keeps
  // its share): re-planning would change nothing, however its prediction compares with a
  // measurement a loaded machine slowed down.
  if (current && same_placement(choice->plan, *current)) {
    std::fprintf(stderr, "  not re-planning: %s is %.1fx slower, but the plan around it is the running one\n",
                 slow->first.c_str(), slow->second);
    last_replan_iteration_ = done;
    forget_slowdown(slow->first);
    return std::nullopt;
  }
  const double cost_per_iteration = options_.replan_cost_s / left;
  const double predicted = choice->prediction.predicted_s + cost_per_iteration;
  const double gain = measured > 0 ? 1 - predicted / measured : 0;
  const bool kept = plan_uses(choice->plan, slow->first);
  char why[480];
  std::snprintf(why, sizeof why,
                "%s computes %.1fx slower than it did; the plan %s is predicted %.4f s "
                "per iteration (+%.4f s of re-planning spread over %d iterations) against "
                "%.4f s measured: predicted gain %+.0f%%",
                slow->first.c_str(), slow->second,
                kept ? ("keeping it with a smaller share (" + share_text(choice->plan, slow->first) +
                        ")").c_str()
                     : "without it",
                choice->prediction.predicted_s, cost_per_iteration, left, measured, 100 * gain);
  last_replan_iteration_ = done;
  if (gain <= options_.threshold) {
    std::fprintf(stderr, "  not re-planning: %s (threshold %.0f%%)\n", why, 100 * options_.threshold);
    forget_slowdown(slow->first);
    return std::nullopt;
  }
  if (loop_ && !kept) {
    std::lock_guard lock{loop_->mu};
    loop_->excluded.insert(slow->first);
    auto& factor = loop_->slowed[slow->first];
    factor = std::max(1.0, factor) * slow->second;
  }
  return std::string(why);
}

result<planned> drift_watch::best_around(const std::pair<std::string, double>& slow,
                                         const std::set<std::string>& gone,
                                         const std::optional<config::plan>& current) {
  actors::plan_request what_if;
  // Searched on the running plan's profile (cached): asking profiles nothing.
  what_if.has_current = current.has_value();
  if (current)
    what_if.current = *current;
  // The plan without the slow node is always a choice.
  actors::plan_request without_it = what_if;
  for (const auto& n : nodes_)
    if (!gone.count(n.name) && n.name != slow.first)
      without_it.nodes.push_back(n);
  auto without = what_if_(without_it);
  if (!loop_)  // no search to ask for a share
    return without;
  // With the loop, the slow node is also a candidate at its measured speed (a type of its
  // own): the search gives it a smaller share, or none.
  for (const auto& n : nodes_)
    if (!gone.count(n.name))
      what_if.nodes.push_back(n);
  {
    std::lock_guard lock{loop_->mu};
    auto& factor = loop_->slowed[slow.first];
    previous_slowdown_ = factor;
    factor = std::max(1.0, factor) * slow.second;
  }
  auto with = what_if_(what_if);
  // Kept only when clearly faster than without it: a straggler's speed is measured over a
  // few iterations and may still be falling.
  if (with && plan_uses(with->plan, slow.first) &&
      (!without || with->prediction.predicted_s <
                     (1 - options_.threshold) * without->prediction.predicted_s))
    return with;
  forget_slowdown(slow.first);
  return without ? std::move(without) : std::move(with);
}

void drift_watch::observe_link(const actors::train_report& r, const plan_prediction& running,
                               const config::plan& current) {
  const auto s = static_cast<std::size_t>(r.stage);
  if (s >= current.stages.size() || s >= running.stages.size())
    return;
  std::set<std::string> zones;
  for (const auto& rep : current.stages[s].replicas)
    zones.insert(rep.zone);
  if (zones.size() != 2)
    return;
  const auto key = simulator::link_key(*zones.begin(), *zones.rbegin());
  // Against the prediction before the link's correction (as the GPU types' is): against the
  // corrected one, the factor would chase itself back to 1.
  auto applied = running.link_factors.find(key);
  const double predicted = running.stages[s].allreduce_s /
                           (applied == running.link_factors.end() ? 1.0 : applied->second);
  std::lock_guard lock{loop_->mu};
  // The plan's warm-up, and a straggler's peers waiting in the all-reduce, say nothing about
  // the link.
  if (loop_->suspect || r.iteration <= loop_->plan_start_iteration || !(predicted > 0))
    return;
  loop_->links.add(key, predicted, r.all_reduce_s);
}

std::optional<std::string> drift_watch::link_note() {
  if (!loop_)
    return std::nullopt;
  std::map<std::string, std::pair<double, std::size_t>> now;
  {
    std::lock_guard lock{loop_->mu};
    for (const auto& [key, factor] : loop_->links.factors())
      now[key] = {factor, loop_->links.samples(key)};
  }
  std::string out = std::move(why_not_);
  why_not_.clear();
  for (const auto& [key, figure] : now) {
    auto& noted = noted_links_[key];
    if (noted > 0 && std::abs(figure.first / noted - 1) < 0.1)
      continue;
    noted = figure.first;
    char line[240];
    std::snprintf(line, sizeof line,
                  "%slink %s: its all-reduce measured %.2fx the prediction (median of %zu "
                  "samples); plans use the link corrected by it",
                  out.empty() ? "" : "; ", key.c_str(), figure.first, figure.second);
    out += line;
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

bool drift_watch::link_drifted(const plan_prediction& running) const {
  if (!loop_)
    return false;
  std::lock_guard lock{loop_->mu};
  for (const auto& [k, f] : loop_->links.factors()) {
    auto then = running.link_factors.find(k);
    const double m = f / (then == running.link_factors.end() ? 1.0 : then->second);
    if (loop_->links.samples(k) >= options_.link_samples &&
        std::max(m, 1 / m) >= options_.link_factor)
      return true;
  }
  return false;
}

std::optional<std::string> drift_watch::link_drift(
  const plan_prediction& running, const std::vector<actors::iteration_record>& records, int left,
  const std::set<std::string>& gone, const std::optional<config::plan>& current) {
  if (!loop_ || !current || left <= 0 || records.size() < static_cast<std::size_t>(options_.window))
    return std::nullopt;
  // The zone pair whose correction moved most off the one the running plan was predicted
  // with, and not asked about again unless it moved by 10% more since.
  std::string key;
  double moved = 1, factor = 1;
  std::size_t samples = 0;
  auto off = [](double m) { return std::max(m, 1 / m); };
  {
    std::lock_guard lock{loop_->mu};
    for (const auto& [k, f] : loop_->links.factors()) {
      auto then = running.link_factors.find(k);
      const double m = f / (then == running.link_factors.end() ? 1.0 : then->second);
      auto asked = asked_links_.find(k);
      if ((asked != asked_links_.end() && off(f / asked->second) < 1.1) ||
          loop_->links.samples(k) < options_.link_samples)
        continue;
      if (off(m) > off(moved)) {
        key = k;
        moved = m;
        factor = f;
        samples = loop_->links.samples(k);
      }
    }
  }
  if (key.empty() || off(moved) < options_.link_factor)
    return std::nullopt;
  // The running plan's iterations only, its first (warm-up) left out.
  std::int64_t start = 0;
  {
    std::lock_guard lock{loop_->mu};
    start = loop_->plan_start_iteration;
  }
  std::vector<double> recent;
  for (auto it = records.rbegin(); it != records.rend() && recent.size() < static_cast<std::size_t>(options_.window); ++it)
    if (it->iteration > start)
      recent.push_back(it->measured_s);
  if (recent.size() < static_cast<std::size_t>(options_.window))
    return std::nullopt;
  asked_links_[key] = factor;
  actors::plan_request what_if;
  what_if.has_current = true;
  what_if.current = *current;
  for (const auto& n : nodes_)
    if (!gone.count(n.name))
      what_if.nodes.push_back(n);
  auto choice = what_if_(what_if);
  char head[240];
  std::snprintf(head, sizeof head,
                "link %s: what crosses it takes %.2fx the time the running plan was predicted "
                "with (its all-reduce, median of %zu samples)",
                key.c_str(), moved, samples);
  if (!choice) {
    why_not_ = std::string(head) + "; not re-planning: no plan on the corrected link: " +
               choice.error().message;
    return std::nullopt;
  }
  const double measured = median_of(recent);
  const double cost_per_iteration = options_.replan_cost_s / left;
  const double predicted = choice->prediction.predicted_s + cost_per_iteration;
  const double gain = measured > 0 ? 1 - predicted / measured : 0;
  auto described = actors::describe_plan(choice->plan);
  std::replace(described.begin(), described.end(), '\n', ';');
  char tail[600];
  std::snprintf(tail, sizeof tail,
                "; the search's plan on the corrected link (%s) is predicted %.4f s per "
                "iteration (+%.4f s of re-planning spread over %d iterations) against %.4f s "
                "measured: predicted gain %+.0f%%",
                described.c_str(), choice->prediction.predicted_s,
                cost_per_iteration, left, measured, 100 * gain);
  const std::string why = std::string(head) + tail;
  if (running.planner == "fixed") {
    why_not_ = "not re-planning: " + why + " (the plan is fixed: --plan)";
    return std::nullopt;
  }
  if (same_shape(choice->plan, *current)) {
    why_not_ = "not re-planning: " + why + " (the search keeps the running plan's shape)";
    return std::nullopt;
  }
  if (gain <= options_.threshold) {
    char t[64];
    std::snprintf(t, sizeof t, " (threshold %.0f%%)", 100 * options_.threshold);
    why_not_ = "not re-planning: " + why + t;
    return std::nullopt;
  }
  return why;
}

void drift_watch::forget_slowdown(const std::string& node) {
  if (!loop_)
    return;
  std::lock_guard lock{loop_->mu};
  if (previous_slowdown_ > 1)
    loop_->slowed[node] = previous_slowdown_;
  else
    loop_->slowed.erase(node);
}

}  // namespace sailor::app
