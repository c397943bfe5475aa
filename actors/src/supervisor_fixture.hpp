#pragma once
// Test-only: the supervisor under CAF's deterministic test scheduler, with nodes played by
// small fake actors (job_supervisor.test.cpp, supervisor_training.test.cpp).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <caf/exit_reason.hpp>

#include "deterministic_system.hpp"
#include "sailor/actors/job_supervisor.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/planner_actor.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/actors/zone_coordinator.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

struct fake_log {
  bool joined = false;
  bool refused = false;
  std::string refusal;
  join_accepted accepted;
  std::vector<role_assignment> assignments;
  std::vector<training_job> jobs;
  std::vector<checkpoint_kept> kept;  ///< the checkpoints its writers were told to keep
  bool shut_down = false;
  shutdown_kind farewell = shutdown_kind::released;  ///< the kind of the last shutdown_notice
  bool silent = false;  ///< roles are not answered (a node stuck before its stage actors)
};

// A node as the supervisor sees it: joins, answers every role with stage_ready.
caf::behavior fake_node(caf::event_based_actor* self, supervisor_actor supervisor, join_request join,
                        std::shared_ptr<fake_log> log) {
  self->send(supervisor, join);
  return {
    [log](const join_accepted& x) {
      log->joined = true;
      log->accepted = x;
    },
    [log](const join_refused& x) {
      log->refused = true;
      log->refusal = x.reason;
    },
    [self, supervisor, log, name = join.inventory.name](const role_assignment& x) {
      log->assignments.push_back(x);
      if (log->silent)
        return;
      for (auto& role : x.roles)
        self->send(supervisor, stage_ready{name, role});
    },
    [log](const training_job& x) { log->jobs.push_back(x); },
    [log](const checkpoint_kept& x) { log->kept.push_back(x); },
    // What the node's ranks report, sent from the node's own endpoint.
    [self, supervisor](const train_report& x) { self->send(supervisor, x); },
    [log](const shutdown_notice& x) {
      log->shut_down = true;
      log->farewell = x.kind;
    },
    [self, supervisor, name = join.inventory.name](preempt_atom) {
      self->send(supervisor, preemption_notice{name, "spot reclaimed", 2.5});  // 2.5 s left
    },
  };
}

struct deterministic : sailor::actors::testing::deterministic_system {
  supervisor_actor supervisor;
  std::map<std::string, std::shared_ptr<fake_log>> logs;
  std::map<std::string, caf::actor> fakes;

  ~deterministic() {
    for (auto& [name, fake] : fakes)
      caf::anon_send_exit(fake, caf::exit_reason::user_shutdown);
    if (supervisor)
      caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    sched.run();
  }

  supervisor_options options(int quorum = 4) {
    supervisor_options o;
    o.zones = {"a", "b"};
    o.quorum = quorum;
    o.settle = 1s;
    o.heartbeat_interval = 100ms;
    o.heartbeat_timeout = 300ms;
    return o;
  }

  void start(supervisor_options o, scheduler_actor scheduler = {}) {
    if (!scheduler)
      scheduler = system.spawn(planner_actor, [](const plan_request& r) {
        return even_plan(r.nodes, 6, 8);
      });
    o.scheduler = scheduler;
    supervisor = system.spawn(job_supervisor, o);
    sched.run();
  }

  supervisor_state& state() {
    using supervisor_type = supervisor_actor::stateful_base<supervisor_state>;
    auto* ptr = dynamic_cast<supervisor_type*>(caf::actor_cast<caf::abstract_actor*>(supervisor));
    REQUIRE(ptr != nullptr);
    return ptr->state;
  }

  std::shared_ptr<fake_log> join(const std::string& name, const std::string& zone, int devices = 2,
                                 std::uint16_t version = protocol_version, bool silent = false,
                                 const std::string& device_kind = "cpu",
                                 std::int64_t last_plan_version = 0) {
    join_request request;
    request.version = version;
    request.last_plan_version = last_plan_version;
    request.inventory = node_inventory{name, zone, "CPU", "host", {}};
    request.inventory.address = name + ":7000";
    for (int k = 0; k < devices; ++k)
      request.inventory.devices.push_back(device_info{k, device_kind, 1ull << 30});
    auto log = std::make_shared<fake_log>();
    log->silent = silent;
    auto key = logs.count(name) ? name + "#" + std::to_string(logs.size()) : name;
    logs[key] = log;
    fakes[key] = system.spawn(fake_node, supervisor, request, log);
    sched.run();
    return log;
  }

  void join_four() {
    join("n1", "a");
    join("n2", "a");
    join("n3", "b");
    join("n4", "b");
  }

  // Heartbeats from `nodes`, then `step` of time.
  void beat_and_advance(const std::vector<std::string>& nodes, caf::timespan step) {
    for (auto& n : nodes) {
      auto zone = state().nodes.at(n).inventory.zone;
      caf::anon_send(state().zones.at(zone), heartbeat{n, 1});
    }
    sched.run();
    sched.advance_time(step);
    sched.run();
  }

  // `total` of time in steps of `step`, every node still in the job beating at each.
  void run_for(caf::timespan total, caf::timespan step = 100ms) {
    for (caf::timespan t{0}; t < total; t += step) {
      std::vector<std::string> alive;
      for (auto& [name, node] : state().nodes)
        alive.push_back(name);
      beat_and_advance(alive, step);
    }
  }

  bool has_event(const std::string& text) {
    for (auto& e : state().events)
      if (e.find(text) != std::string::npos)
        return true;
    return false;
  }
};

}  // namespace
