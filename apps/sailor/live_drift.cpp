#include "live_drift.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <signal.h>

#include <fstream>

#include <caf/send.hpp>

#include "live_planning.hpp"
#include "live_slow_nodes.hpp"
#include "sailor/actors/loop_note.hpp"
#include "local_cluster.hpp"
#include "sailor/comm/link_table.hpp"

namespace sailor::app {
namespace {

// The nodes `sailor demo` starts: node-k in zone k mod Z, one CPU device each.
std::vector<actors::node_inventory> local_nodes(const local_run_args& args) {
  std::vector<actors::node_inventory> out;
  for (int k = 0; k < args.nodes; ++k) {
    actors::node_inventory n;
    n.name = "node-" + std::to_string(k);
    n.zone = local_zone_name(k % std::max(1, args.zones));
    n.gpu_type = "CPU";
    n.devices.push_back({0, "cpu", 0});
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

double cross_zone_allreduce_s(const plan_prediction& prediction, const config::plan& plan) {
  double out = 0;
  for (std::size_t s = 0; s < plan.stages.size() && s < prediction.stages.size(); ++s) {
    std::set<std::string> zones;
    for (const auto& r : plan.stages[s].replicas)
      zones.insert(r.zone);
    if (zones.size() > 1)
      out = std::max(out, prediction.stages[s].allreduce_s);
  }
  return out;
}

namespace {

// What the drift watch asks: the planning itself, but for a fixed plan the search (a fixed
// plan is not re-planned; the search's answer says what that costs).
local_planning_inputs searching(local_planning_inputs in) {
  if (in.fixed) {
    in.fixed.reset();
    in.policy = "search";
  }
  return in;
}

}  // namespace

local_drift::local_drift(const local_run_args& args, local_planning_inputs planning,
                         std::shared_ptr<actors::status_board> board)
    : straggler_at_(args.straggler_at), straggler_slowdown_(args.straggler_slowdown),
      iterations_(args.iterations),
      enabled_(args.replan_on_drift || args.straggler_at > 0 || args.link_change_at > 0),
      link_change_at_(args.link_change_at), link_change_(args.link_change),
      board_(std::move(board)),
      watch_([asked = searching(planning)](const actors::plan_request& r) {
               return plan_and_predict(asked, r, true);
             },
             planning.loop, local_nodes(args)),
      planning_loop_(planning.loop) {}

void local_drift::slow_one_node(local_cluster& cluster, training_events& events,
                                local_progress& progress) {
  straggled_ = true;
  std::string name;
  {
    std::lock_guard lock{events.mu};
    if (events.plan)
      for (const auto& st : events.plan->stages)
        for (const auto& r : st.replicas)
          if (name.empty() && !r.nodes.empty())
            name = r.nodes.front();
  }
  for (auto& c : cluster.children())
    if (c.name == name && c.exit_code == -1) {
      std::ofstream(cluster.work() / (name + ".slowdown")) << straggler_slowdown_ << "\n";
      kill(c.pid, SIGUSR2);
      std::printf("  slowing %s %.1fx (SIGUSR2) after iteration %d\n", name.c_str(),
                  straggler_slowdown_, progress.done());
      std::fflush(stdout);
      progress.straggled(progress.done());
      return;
    }
}

void local_drift::change_link(local_cluster& cluster, local_progress& progress) {
  link_changed_ = true;
  auto link = comm::parse_link_change(link_change_, "--link-change");
  if (!link)  // checked with the other inputs
    return;
  int told = 0;
  for (auto& c : cluster.children())
    if (c.exit_code == -1) {
      std::ofstream(cluster.work() / (c.name + ".links")) << link_change_ << "\n";
      kill(c.pid, SIGUSR2);
      ++told;
    }
  std::printf("  link %s <-> %s changed to %.1f ms, %.3g MB/s in %d nodes (--link-file and "
              "SIGUSR2) after iteration %d\n",
              link->from.c_str(), link->to.c_str(), link->latency_s * 1000,
              link->bandwidth_gbytes_per_s * 1000, told, progress.done());
  std::fflush(stdout);
  progress.link_changed(progress.done(), link_change_);
}

void local_drift::step(local_cluster& cluster, training_events& events, local_progress& progress) {
  if (straggler_at_ > 0 && !straggled_ && progress.done() >= straggler_at_)
    slow_one_node(cluster, events, progress);
  if (link_change_at_ > 0 && !link_changed_ && progress.done() >= link_change_at_)
    change_link(cluster, progress);
  plan_prediction running;
  std::int64_t version = 0;
  std::optional<config::plan> current;
  {
    std::lock_guard lock{events.mu};
    running = events.prediction;
    version = events.plan_version;
    current = events.plan;
  }
  // A fixed plan is watched too: its links are corrected, and why it is not re-planned said.
  if (!enabled_ || !board_ || running.stages.empty())
    return;
  const auto& gone_list = progress.preempted_nodes();
  std::set<std::string> gone{gone_list.begin(), gone_list.end()};
  auto why = watch_.check(board_->reports(8), running, version, progress.records(),
                          progress.total() - progress.done(), gone, current);
  if (auto note = watch_.link_note()) {
    std::printf("  closed loop: %s\n", note->c_str());
    std::fflush(stdout);
    caf::anon_send(cluster.supervisor(), actors::loop_note_atom::value, *note);
    progress.loop_note(*note);
  }
  if (planning_loop_) {
    std::lock_guard lock{planning_loop_->mu};
    progress.link_factors(planning_loop_->links.factors());
  }
  if (!why)
    return;
  std::printf("  re-planning on drift: %s\n", why->c_str());
  std::fflush(stdout);
  progress.drift_replan(*why);
  progress.touch();
  caf::anon_send(cluster.supervisor(), actors::drift_replan_atom::value, *why);
}

}  // namespace sailor::app
