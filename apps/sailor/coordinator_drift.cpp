#include "coordinator_drift.hpp"

#include <cstdio>

#include <caf/send.hpp>

#include "live_drift.hpp"
#include "live_planning.hpp"
#include "sailor/actors/loop_note.hpp"

namespace sailor::app {

actors::planning_function coordinator_drift::planner(local_planning_inputs planning) {
  if (!planning.loop)
    planning.loop = std::make_shared<live_loop>();
  loop_ = planning.loop;
  watch_.emplace(
    [planning](const actors::plan_request& r) { return plan_and_predict(planning, r, true); },
    loop_, std::vector<actors::node_inventory>{});
  return [planning, this](const actors::plan_request& request) -> result<config::plan> {
    auto made = plan_and_predict(planning, request, false);
    if (!made)
      return made.error();
    planned(request.nodes, made->prediction);
    return std::move(made->plan);
  };
}

void coordinator_drift::planned(const std::vector<actors::node_inventory>& nodes,
                                const plan_prediction& p) {
  std::lock_guard lock{mu_};
  nodes_ = nodes;
  newest_ = p;
}

void coordinator_drift::plan_started(const actors::training_job& tj) {
  plan_prediction running;
  {
    std::lock_guard lock{mu_};
    running_ = running = newest_;
    plan_version_ = tj.plan_version;
    current_ = tj.plan;
  }
  if (loop_)
    loop_->on_plan(tj.start_iteration, running.uncorrected_s, running.bottleneck_type,
                   cross_zone_allreduce_s(running, tj.plan));
}

void coordinator_drift::iteration(const actors::iteration_record& r,
                                  const actors::training_progress& p) {
  if (loop_)
    loop_->observe(r);
  std::lock_guard lock{mu_};
  // A plan resumed from an earlier checkpoint runs iterations again: their new records
  // replace the old ones.
  while (!records_.empty() && records_.back().iteration >= r.iteration)
    records_.pop_back();
  records_.push_back(r);
  total_ = p.iterations();
  completed_ = p.completed_count();
}

void coordinator_drift::start(std::shared_ptr<actors::status_board> board, actors::supervisor_actor supervisor) {
  if (!enabled_ || !watch_ || !board || thread_.joinable())
    return;
  thread_ = std::thread{[this, board = std::move(board), supervisor = std::move(supervisor)] {
    run(board, supervisor);
  }};
}

void coordinator_drift::stop() {
  {
    std::lock_guard lock{mu_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void coordinator_drift::run(std::shared_ptr<actors::status_board> board, actors::supervisor_actor supervisor) {
  std::unique_lock lock{mu_};
  while (!wake_.wait_for(lock, std::chrono::milliseconds{200}, [this] { return stopping_; })) {
    if (running_.stages.empty() || records_.empty())
      continue;
    const auto running = running_;
    const auto version = plan_version_;
    const auto current = current_;
    const auto records = records_;
    const int left = total_ - completed_;
    watch_->set_nodes(nodes_);
    lock.unlock();
    // Asking the search takes its time: the supervisor's callbacks go on meanwhile.
    auto why = watch_->check(board->reports(8), running, version, records, left, {}, current);
    if (why) {
      std::printf("re-planning on drift: %s\n", why->c_str());
      std::fflush(stdout);
      caf::anon_send(supervisor, actors::drift_replan_atom::value, *why);
    }
    if (auto note = watch_->link_note()) {
      std::printf("closed loop: %s\n", note->c_str());
      std::fflush(stdout);
      caf::anon_send(supervisor, actors::loop_note_atom::value, *note);
    }
    lock.lock();
  }
}

}  // namespace sailor::app
