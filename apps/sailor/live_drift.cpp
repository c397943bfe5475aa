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

local_drift::local_drift(const local_run_args& args, local_planning_inputs planning,
                         std::shared_ptr<actors::status_board> board)
    : straggler_at_(args.straggler_at), straggler_slowdown_(args.straggler_slowdown),
      iterations_(args.iterations), enabled_(args.replan_on_drift || args.straggler_at > 0),
      board_(std::move(board)),
      watch_([planning](const actors::plan_request& r) { return plan_and_predict(planning, r, true); },
             planning.loop, local_nodes(args)) {}

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

void local_drift::step(local_cluster& cluster, training_events& events, local_progress& progress) {
  if (straggler_at_ > 0 && !straggled_ && progress.done() >= straggler_at_)
    slow_one_node(cluster, events, progress);
  plan_prediction running;
  std::int64_t version = 0;
  std::optional<config::plan> current;
  {
    std::lock_guard lock{events.mu};
    running = events.prediction;
    version = events.plan_version;
    current = events.plan;
  }
  if (!enabled_ || !board_ || running.stages.empty() || running.planner == "fixed")
    return;
  const auto& gone_list = progress.preempted_nodes();
  std::set<std::string> gone{gone_list.begin(), gone_list.end()};
  auto why = watch_.check(board_->reports(8), running, version, progress.records(),
                          progress.total() - progress.done(), gone, current);
  if (auto note = watch_.link_note()) {
    std::printf("  closed loop: %s\n", note->c_str());
    std::fflush(stdout);
    caf::anon_send(cluster.supervisor(), actors::loop_note_atom::value, *note);
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
