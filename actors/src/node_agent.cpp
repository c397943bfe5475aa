#include "sailor/actors/node_agent.hpp"

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "sailor/actors/probe_messages.hpp"
#include "sailor/config/log.hpp"

namespace sailor::actors {
namespace {

using agent = node_agent_actor::stateful_base<node_agent_state>;

// The zone coordinator is a dynamically typed actor (a bridge proxy), which a typed actor's
// send() does not take: sent as this agent all the same.
template <class... Ts>
void tell(agent* self, const caf::actor& to, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), to, std::forward<Ts>(xs)...);
}

void finish(agent* self, agent_outcome::kind how, std::string reason) {
  auto& outcome = *self->state.options.outcome;
  if (outcome.how == agent_outcome::kind::running) {
    outcome.how = how;
    outcome.reason = std::move(reason);
  }
  for (auto& stage : self->state.stages)
    self->send_exit(stage, caf::exit_reason::user_shutdown);
  self->state.stages.clear();
  self->quit();
}

void stop_stages(agent* self) {
  for (auto& stage : self->state.stages)
    self->send_exit(stage, caf::exit_reason::user_shutdown);
  self->state.stages.clear();
  self->state.ready = 0;
}

// The newest checkpoint complete across stages: the trainer pins it for its writers.
void keep_checkpoint(agent* self, const checkpoint_kept& x) {
  if (self->state.options.on_checkpoint_kept)
    self->state.options.on_checkpoint_kept(x);
}

// Told by the coordinator to go: the job finished, it was let go, or it was declared lost.
void shut_down(agent* self, const shutdown_notice& x) {
  using kind = agent_outcome::kind;
  const auto& name = self->state.options.inventory.name;
  switch (x.kind) {
    case shutdown_kind::job_finished:
      log::get("actors")->info("[node {}] shut down by the coordinator: {}", name, x.reason);
      finish(self, kind::job_finished, x.reason);
      return;
    case shutdown_kind::declared_lost:
      log::get("actors")->warn("[node {}] the coordinator declared it lost: {}", name, x.reason);
      finish(self, kind::declared_lost, x.reason);
      return;
    case shutdown_kind::released:
    case shutdown_kind::stopped:
      break;
  }
  log::get("actors")->warn("[node {}] shut down by the coordinator before the job finished: {}",
                           name, x.reason);
  finish(self, kind::shut_down, x.reason);
}

void take_job(agent* self, const role_assignment& x);

// Preempted with notice: the supervisor knows, the ranks are stopped (they keep their state in
// memory and report it through here); the node stays until the next plan took that state. It
// takes no role in the next plan, but its trainer is told of it: the shard server then lets
// the plan's nodes fetch that state.
node_agent_actor::behavior_type leaving(agent* self) {
  return {
    [self](training_job& x) { self->state.jobs[x.plan_version] = std::move(x); },
    [self](const role_assignment& x) { take_job(self, x); },
    [self](train_report& x) { self->send(self->state.options.supervisor, std::move(x)); },
    [self](const checkpoint_kept& x) { keep_checkpoint(self, x); },
    [self](const shutdown_notice& x) {
      log::get("actors")->info("[node {}] leaves: {}", self->state.options.inventory.name, x.reason);
      finish(self, agent_outcome::kind::preempted, "preempted");
    },
    [self](leave_atom) {
      log::get("actors")->warn("[node {}] grace period over: leaving",
                               self->state.options.inventory.name);
      finish(self, agent_outcome::kind::preempted, "preempted");
    },
    [](tick_atom) {},
    [](preempt_atom) {},
    [](const stage_ready&) {},
    [](const stage_failed&) {},
    [](start_atom) {},
    [](const join_accepted&) {},
    [](const join_refused&) {},
    [](const protocol::link_probe_request&) {},
  };
}

// The training job of the plan just assigned, with the assignment's plan (the job travels
// without it), goes to the trainer before any stage of the plan starts.
void take_job(agent* self, const role_assignment& x) {
  auto& st = self->state;
  auto job = st.jobs.find(x.plan_version);
  if (job != st.jobs.end()) {
    job->second.plan = x.plan;
    if (st.options.on_training_job)
      st.options.on_training_job(job->second);
  }
  st.jobs.erase(st.jobs.begin(), st.jobs.upper_bound(x.plan_version));
}

// A link probe the coordinator asked for: answered to the asking actor, from the probe's
// thread (the agent does not wait for it).
void link_probe(agent* self, const protocol::link_probe_request& x) {
  auto to = caf::actor_cast<caf::actor>(self->current_sender());
  if (!to)
    return;
  auto answer = [to](protocol::link_probe_result r) { caf::anon_send(to, std::move(r)); };
  auto& st = self->state;
  if (!st.options.on_link_probe) {
    answer({x.probe_id, st.options.inventory.name, "this node does not probe links", {}, 0, {}, {}, 0});
    return;
  }
  st.options.on_link_probe(x, std::move(answer));
}

node_agent_actor::behavior_type member(agent* self) {
  return {
    [self](const protocol::link_probe_request& x) { link_probe(self, x); },
    [self](const role_assignment& x) {
      auto& st = self->state;
      if (x.plan_version < st.plan_version)
        return;
      stop_stages(self);
      st.plan_version = x.plan_version;
      take_job(self, x);
      auto& name = st.options.inventory.name;
      log::get("actors")->info("[node {}] plan v{}: {} roles", name, x.plan_version,
                               x.roles.size());
      for (auto& role : x.roles)
        st.stages.push_back(self->spawn(stage_actor, name, role, node_agent_actor{self}, st.options.hook));
    },
    [self](stage_ready& x) {
      if (x.role.plan_version != self->state.plan_version)
        return;
      ++self->state.ready;
      self->send(self->state.options.supervisor, std::move(x));
    },
    [self](training_job& x) {
      auto& jobs = self->state.jobs;
      jobs.erase(jobs.begin(), jobs.lower_bound(self->state.plan_version));  // stale ones
      jobs[x.plan_version] = std::move(x);
      while (jobs.size() > 4)  // jobs never followed by their assignment do not pile up
        jobs.erase(jobs.begin());
    },
    [self](train_report& x) {  // from a local training thread: to the supervisor
      self->send(self->state.options.supervisor, std::move(x));
    },
    [self](const checkpoint_kept& x) { keep_checkpoint(self, x); },
    [self](stage_failed& x) {
      if (x.role.plan_version != self->state.plan_version)
        return;
      self->send(self->state.options.supervisor, std::move(x));
    },
    [self](tick_atom) {
      auto& st = self->state;
      if (st.zone)
        tell(self, st.zone, heartbeat{st.options.inventory.name, ++st.heartbeat_seq});
      self->delayed_send(self, st.heartbeat_interval, tick_atom::value);
    },
    [self](preempt_atom) {
      auto& st = self->state;
      log::get("actors")->warn("[node {}] preempted: telling the supervisor, handing over its "
                               "state for up to {} ms, then leaving",
                               st.options.inventory.name,
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                 st.options.leave_grace)
                                 .count());
      auto grace_s = std::chrono::duration<double>(st.options.leave_grace).count();
      self->send(st.options.supervisor,
                 preemption_notice{st.options.inventory.name, "preemption notice", grace_s});
      if (st.options.on_leaving)
        st.options.on_leaving();
      stop_stages(self);
      self->delayed_send(self, st.options.leave_grace, leave_atom::value);
      self->become(leaving(self));
    },
    [self](const shutdown_notice& x) { shut_down(self, x); },
    [](leave_atom) {},
    [](start_atom) {},
    [](const join_accepted&) {},
    [](const join_refused&) {},
  };
}

}  // namespace

node_agent_actor::behavior_type node_agent(agent* self, node_agent_options options) {
  self->state.options = std::move(options);
  auto& st = self->state;
  self->monitor(st.options.supervisor);
  self->set_down_handler([self](caf::down_msg& msg) {
    if (msg.source == self->state.options.supervisor.address()) {
      log::get("actors")->error("[node {}] lost the coordinator: {}",
                                self->state.options.inventory.name, caf::to_string(msg.reason));
      finish(self, agent_outcome::kind::coordinator_lost, caf::to_string(msg.reason));
    }
  });
  log::get("actors")->info("[node {}] joining: zone {}, {} x {} devices", st.options.inventory.name,
                           st.options.inventory.zone, st.options.inventory.devices.size(),
                           st.options.inventory.gpu_type);
  // [joining]: the join goes out on `start`, once the agent is reachable by name.
  return {
    [self](start_atom) {
      auto& st = self->state;
      self->send(st.options.supervisor, join_request{protocol_version, st.options.inventory, st.options.last_plan_version});
    },
    [self](const join_accepted& x) {
      auto& st = self->state;
      st.heartbeat_interval = std::chrono::milliseconds{std::max<std::int64_t>(1, x.heartbeat_interval_ms)};
      if (st.options.resolve)
        st.zone = st.options.resolve(x.zone_actor);
      log::get("actors")->info("[node {}] joined; heartbeats every {} ms to {}",
                               st.options.inventory.name, x.heartbeat_interval_ms, x.zone_actor);
      if (st.zone)
        tell(self, st.zone, heartbeat{st.options.inventory.name, ++st.heartbeat_seq});
      self->delayed_send(self, st.heartbeat_interval, tick_atom::value);
      self->become(member(self));
    },
    [self](const join_refused& x) {
      log::get("actors")->error("[node {}] refused: {}", self->state.options.inventory.name,
                                x.reason);
      finish(self, agent_outcome::kind::refused, x.reason);
    },
    [self](preempt_atom) {
      finish(self, agent_outcome::kind::preempted, "preempted before joining");
    },
    // Nothing else happens before the join is answered.
    [](const role_assignment&) {},
    [](const training_job&) {},
    [](const checkpoint_kept&) {},
    [](const protocol::link_probe_request&) {},
    [](const shutdown_notice&) {},
    [](const stage_ready&) {},
    [](const stage_failed&) {},
    [](const train_report&) {},
    [](tick_atom) {},
    [](leave_atom) {},
  };
}

}  // namespace sailor::actors
