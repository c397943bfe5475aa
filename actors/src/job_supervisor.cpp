#include "sailor/actors/job_supervisor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "peer_checks.hpp"
#include "supervisor_internal.hpp"
#include "supervisor_scheduler.hpp"
#include "sailor/actors/loop_note.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/replica_group.hpp"
#include "sailor/actors/zone_coordinator.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/text.hpp"

namespace sailor::actors {
namespace supervision {

void record(supervisor* self, std::string event) {
  auto& st = self->state;
  if (st.options.board)
    st.options.board->add_event(event, st.plan_version);
  st.events.push_back(std::move(event));
  while (st.events.size() > st.options.max_events)
    st.events.pop_front();
  if (st.options.board)
    publish_board(self);
}

// A peer refused at the door: kept (bounded) for `sailor status` and in the event log.
void refused(supervisor* self, peer_refused x, bool as_event = true) {
  auto& st = self->state;
  if (x.unix_ms == 0)
    x.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  if (as_event)
    record(self, "refused peer " + x.peer + ": " + x.reason);
  st.refusals.push_back(std::move(x));
  while (st.refusals.size() > st.options.max_events)
    st.refusals.pop_front();
}

std::vector<node_inventory> inventory(supervisor* self) {
  std::vector<node_inventory> out;
  for (auto& [name, node] : self->state.nodes)
    if (!excluded_from_plans(self, name))  // drained or forbidden by the scheduler
      out.push_back(node.inventory);
  return out;
}

supervisor_actor::behavior_type collecting(supervisor* self);
supervisor_actor::behavior_type planning(supervisor* self);
supervisor_actor::behavior_type running(supervisor* self);

void clear_roles(supervisor* self) {
  auto& st = self->state;
  for (auto& [key, group] : st.groups)
    self->send_exit(group, caf::exit_reason::user_shutdown);
  st.groups.clear();
  st.roles_total = st.roles_ready = st.replicas_ready = 0;
  st.startup_step.clear();
  for (auto& [name, node] : st.nodes) {
    node.roles.clear();
    node.ready_roles = 0;
    node.state = node_state::joined;
  }
}

// Back to waiting for capacity: nodes keep their connection, the old roles are void.
void wait_for_capacity(supervisor* self, std::string why) {
  auto& st = self->state;
  clear_roles(self);
  st.current.reset();
  st.phase = st.nodes.empty() ? supervisor_phase::collecting : supervisor_phase::waiting;
  st.last_error = why;
  // Release the nodes' stage actors of the void plan.
  ++st.plan_version;
  for (auto& [name, node] : st.nodes)
    self->send(node.endpoint, role_assignment{st.plan_version, {}, {}});
  self->become(collecting(self));
}

void capacity_changed(supervisor* self, const std::string& reason) {
  auto& st = self->state;
  if (st.phase == supervisor_phase::planning) {
    st.capacity_changed = true;
    st.replan_reason = reason;
    return;
  }
  if (st.phase == supervisor_phase::assigning || st.phase == supervisor_phase::running ||
      st.phase == supervisor_phase::waiting) {
    if (st.nodes.empty()) {
      wait_for_capacity(self, "no nodes left");
      return;
    }
    start_planning(self, reason);
    return;
  }
  // collecting: plan when quorum is reached (the settle timer handles the rest).
  if (st.options.quorum > 0 && static_cast<int>(st.nodes.size()) >= st.options.quorum)
    start_planning(self, "quorum of " + count_of(st.options.quorum, "node") + " reached");
}

void release_node(supervisor* self, const supervised_node& node, const std::string& why,
                  const std::string& farewell, shutdown_kind kind) {
  auto& st = self->state;
  self->demonitor(node.endpoint.address());
  if (!farewell.empty()) {
    st.holdings.forget(node.inventory.address);
    self->send(node.endpoint, shutdown_notice{farewell, kind});
  }
  if (auto z = st.zones.find(node.inventory.zone); z != st.zones.end())
    self->send(z->second, untrack_node{node.inventory.name});
  if (st.options.scheduler)
    self->send(st.options.scheduler, availability_event{availability_kind::lost, node.inventory, why});
}

void lose_node(supervisor* self, const std::string& name, const std::string& reason,
               loss_farewell farewell) {
  auto& st = self->state;
  auto i = st.nodes.find(name);
  if (i == st.nodes.end())
    return;
  auto node = std::move(i->second);
  st.nodes.erase(i);
  ++st.nodes_lost;
  log::get("actors")->warn("[supervisor] node {} lost: {}", name, reason);
  record(self, "node " + name + " lost: " + reason);
  // A node declared lost that is in fact alive (stalled) must not keep running old roles. One
  // lost to its heartbeats stops them and joins again, as a new member whose state is offered
  // like any joiner's; one that failed or was evicted is let go.
  const bool rejoin = farewell == loss_farewell::rejoin;
  release_node(self, node, reason,
               farewell == loss_farewell::keep_state ? std::string{} : "declared lost: " + reason,
               rejoin ? shutdown_kind::declared_lost : shutdown_kind::released);
  // The change first: a plan held for the survivors' state that the loss lets go on is then
  // made again without the node, not assigned with it.
  capacity_changed(self, "node " + name + " lost");
  recovery_on_loss(self);
}

// Whether a message about node `name` came from the endpoint that node joined with: no peer
// speaks for another node (a forged preemption would evict it, forged reports end training).
bool from_the_node(supervisor* self, const std::string& name, const char* what) {
  auto i = self->state.nodes.find(name);
  if (i != self->state.nodes.end() && sent_by(self, i->second.endpoint))
    return true;
  if (i == self->state.nodes.end())
    return false;  // a node already gone: its late messages are void
  auto who = detail::printable(name);
  log::get("actors")->warn("[supervisor] refused a {} for node {} from another sender", what, who);
  record(self, std::string("refused a ") + what + " for node " + who + " from another sender");
  return false;
}

void admit(supervisor* self, const join_request& request) {
  auto& st = self->state;
  // Whoever sent the join is taken for a node agent (a bridge proxy of a remote "agent"; a
  // sender's type is not known): what goes to it from now on is checked against that.
  auto sender = caf::actor_cast<node_agent_actor>(self->current_sender());
  auto& inv = request.inventory;
  auto refuse = [&](const std::string& reason, refuse_reason code = refuse_reason::invalid_message) {
    auto name = detail::printable(inv.name);
    auto host = detail::printable(inv.host);
    log::get("actors")->warn("[supervisor] refused node '{}' (zone '{}'): {}", name,
                             detail::printable(inv.zone), reason);
    record(self, "refused node '" + name + "': " + reason);
    refused(self, peer_refused{host.empty() ? name : name + "@" + host, reason, 0}, false);
    if (sender)
      self->send(sender, join_refused{reason, code});
  };
  if (auto bad_text = detail::inventory_refusal(inv)) {
    refuse(*bad_text);
    return;
  }
  if (request.version != protocol_version) {
    refuse("protocol version " + std::to_string(request.version) + ", expected " +
           std::to_string(protocol_version), refuse_reason::protocol_version);
    return;
  }
  if (inv.name.empty()) {
    refuse("the node has no name");
    return;
  }
  if (!st.zones.count(inv.zone)) {
    std::string known;
    for (auto& [zone, actor] : st.zones)
      known += (known.empty() ? "" : ", ") + zone;
    refuse("unknown zone '" + inv.zone + "' (the cluster has: " + known + ")",
           refuse_reason::unknown_zone);
    return;
  }
  if (st.nodes.count(inv.name)) {
    refuse("a node named '" + inv.name + "' has already joined", refuse_reason::duplicate_node);
    return;
  }
  if (st.options.refuse_unknown_plans && request.last_plan_version > st.plan_version) {
    refuse("it ran plan v" + std::to_string(request.last_plan_version) + ", which this job never "
           "issued (its journal's newest is v" + std::to_string(st.plan_version) + "): it comes "
           "from another job, or from a coordinator whose journal is not this one");
    return;
  }
  if (inv.devices.empty()) {
    refuse("the node has no devices");
    return;
  }
  if (!sender) {
    log::get("actors")->warn("[supervisor] join of '{}' without a sender ignored", inv.name);
    return;
  }
  supervised_node node;
  node.inventory = inv;
  node.endpoint = sender;
  // What the node kept from earlier plans (or an earlier coordinator) can be resumed from.
  for (const auto& file : inv.checkpoints)
    st.holdings.add(file, inv.address);
  note_newest_checkpoint(self);
  node.inventory.checkpoints.clear();
  st.nodes.emplace(inv.name, std::move(node));
  self->monitor(sender);
  auto zone = zone_actor_name(inv.zone);
  self->send(sender, join_accepted{inv.name, zone, to_ms(st.options.heartbeat_interval),
                                   to_ms(st.options.heartbeat_timeout)});
  self->send(st.zones[inv.zone], track_node{inv.name});
  if (st.options.on_admitted)
    st.options.on_admitted(inv, caf::actor_cast<caf::actor>(sender));
  if (st.options.scheduler)
    self->send(st.options.scheduler, availability_event{availability_kind::joined, inv, ""});
  log::get("actors")->info("[supervisor] node {} joined: zone {}, {} x {} ({})", inv.name,
                           inv.zone, inv.devices.size(), inv.gpu_type,
                           count_of(static_cast<long long>(st.nodes.size()), "node"));
  record(self, "node " + inv.name + " joined (" + inv.zone + ", " +
                 std::to_string(inv.devices.size()) + " x " + inv.gpu_type + ")");
  if (st.phase == supervisor_phase::collecting && !st.settle_armed) {
    st.settle_armed = true;
    self->delayed_send(self, st.options.settle, settle_atom::value);
  }
  capacity_changed(self, "node " + inv.name + " joined");
}

// The plan's estimate, when it is not from a profile: what it assumed (the planner's notes).
std::string estimate_note(const config::plan& p) {
  if (!p.estimate || p.estimate->notes.empty())
    return {};
  std::string out = fmt::format("; predicted {:.3f} s per iteration from an analytic estimate, "
                                "no profile: ",
                                p.estimate->iteration_time_s);
  for (std::size_t i = 0; i < p.estimate->notes.size(); ++i)
    out += (i ? "; " : "") + p.estimate->notes[i];
  return out;
}

void assign(supervisor* self, config::plan chosen) {
  auto& st = self->state;
  auto nodes = inventory(self);
  if (auto err = place_replicas(chosen, nodes, st.sched.rules)) {  // honours pins and forbids
    log::get("actors")->warn("[supervisor] the plan does not fit the nodes: {}: {}", err->field,
                             err->message);
    record(self, "plan rejected: " + err->field + ": " + err->message);
    wait_for_capacity(self, "placement: " + err->field + ": " + err->message);
    return;
  }
  clear_roles(self);
  ++st.plan_version;
  st.current = chosen;
  st.last_error.clear();
  auto roles = roles_by_node(chosen, st.plan_version);
  std::optional<training_job> training;
  // Iterations completed so far, whatever plan ran them: a resumed plan keeps those before
  // its checkpoint.
  const training_progress previous = std::move(st.training);
  auto earlier = previous.completed();
  st.training = training_progress{};
  st.restore_folder.clear();
  st.restore_iterations = 0;
  st.restore_mixed = false;
  st.checkpoint_dir.clear();
  st.checkpoint_kept_iterations = 0;
  st.checkpoint_every = 0;
  st.checkpoint_failures.clear();
  if (st.options.prepare_training) {
    training_job job;
    job.plan_version = st.plan_version;
    job.plan = chosen;
    for (auto& [name, node] : st.nodes)
      if (roles.count(name)) {
        job.peer_nodes.push_back(name);
        job.peer_addresses.push_back(node.inventory.address);
      }
    if (st.options.prepare_training(job, st.holdings)) {
      // Finished by the survivors but not reported by a lost node: kept, not run again.
      const auto settled = previous.unreported_before(job.start_iteration);
      earlier.insert(earlier.end(), settled.begin(), settled.end());
      std::sort(earlier.begin(), earlier.end(),
                [](const iteration_record& a, const iteration_record& b) { return a.iteration < b.iteration; });
      st.restore_folder = job.restore_dir;
      st.restore_iterations = job.start_iteration;
      st.restore_mixed = mixed_restore(job);
      st.checkpoint_dir = job.checkpoint_dir;
      st.checkpoint_every = job.checkpoint_dir.empty() ? 0 : job.checkpoint_every;
      // What no plan restores from any more is forgotten here, as the nodes remove it.
      if (!job.checkpoint_dir.empty()) {
        std::set<std::string> keep{job.keep_checkpoint_dirs.begin(),
                                   job.keep_checkpoint_dirs.end()};
        keep.insert(job.checkpoint_dir);
        st.holdings.retain_folders(keep);
      }
      const auto initial_val = previous.initial_val_loss();
      st.training = training_progress{st.plan_version,          plan_world_size(chosen),
                                      job.iterations,            chosen.num_stages() - 1,
                                      job.predicted_iteration_s, job.start_iteration,
                                      earlier};
      st.training.set_initial_val_loss(initial_val);
      if (job.start_iteration > 0)
        record(self, "plan v" + std::to_string(st.plan_version) +
                       " resumes training from the checkpoint after iteration " +
                       std::to_string(job.start_iteration));
      training = std::move(job);
      recovery_assigned(self, earlier);
      for (const auto& r : settled) {
        record(self, "iteration " + std::to_string(r.iteration + 1) +
                       " settled from the survivors' reports (a lost node finished it without reporting)");
        announce_iteration(self, r);
      }
    }
  }
  if (st.options.store) {
    store_scope scope{st.plan_version, {}};
    for (auto& [name, node_roles] : roles)
      scope.nodes.push_back(name);
    tell(self, st.options.store, std::move(scope));
  }
  for (auto& [name, node] : st.nodes) {
    auto r = roles.find(name);
    node.roles = r == roles.end() ? std::vector<stage_role>{} : r->second;
    node.state = node.roles.empty() ? node_state::idle : node_state::assigned;
    st.roles_total += static_cast<int>(node.roles.size());
    // To every node, also those without a role: their ranks of older plans stop, keep the
    // checkpoint the plan restores, and drop the folders no plan needs.
    if (training)
      self->send(node.endpoint, *training);
    self->send(node.endpoint, role_assignment{st.plan_version, node.roles, chosen});
  }
  recovery_tell_leaving(self, training, role_assignment{st.plan_version, {}, chosen});
  supervisor_actor me{self};
  for (std::size_t s = 0; s < chosen.stages.size(); ++s)
    for (std::size_t r = 0; r < chosen.stages[s].replicas.size(); ++r)
      st.groups[{static_cast<int>(s), static_cast<int>(r)}] =
        self->spawn(replica_group, st.plan_version, static_cast<int>(s), static_cast<int>(r),
                    chosen.stages[s].replicas[r].tp, me);
  st.phase = supervisor_phase::assigning;
  log::get("actors")->info("[supervisor] plan v{}: {}{}", st.plan_version, describe_plan(chosen),
                           estimate_note(chosen));
  record(self, "plan v" + std::to_string(st.plan_version) + ": " +
                 count_of(chosen.num_stages(), "stage") + ", " +
                 count_of(static_cast<long long>(st.groups.size()), "replica") + ", " +
                 count_of(st.roles_total, "role"));
  tell_plan_applied(self);
  self->become(running(self));
  startup_begin(self);
}

void on_plan(supervisor* self, plan_reply reply) {
  auto& st = self->state;
  if (reply.request_id != st.pending_request || recovery_hold(self, reply))
    return;
  // A plan to switch to while the ranks train: held until they have stopped and kept their
  // state (the request stays pending: the held reply comes back here).
  if (!st.capacity_changed && recovery_replan(self, reply))
    return;
  st.pending_request = 0;
  if (st.capacity_changed) {
    st.capacity_changed = false;
    if (st.nodes.empty()) {
      wait_for_capacity(self, "no nodes left");
      return;
    }
    start_planning(self, st.replan_reason + " while planning");
    return;
  }
  if (!reply.ok) {
    log::get("actors")->warn("[supervisor] no plan: {}", reply.error);
    record(self, "no plan: " + reply.error);
    wait_for_capacity(self, reply.error);
    return;
  }
  assign(self, std::move(reply.plan));
}

void start_planning(supervisor* self, std::string reason) {
  auto& st = self->state;
  if (!st.options.scheduler) {
    wait_for_capacity(self, "no scheduler");
    return;
  }
  st.phase = supervisor_phase::planning;
  st.capacity_changed = false;
  if (st.options.board) {
    st.options.board->planning(reason);
    publish_board(self);
  }
  plan_request request;
  request.request_id = st.next_request++;
  request.reason = reason;
  request.nodes = inventory(self);
  request.has_current = st.current.has_value();
  if (st.current)
    request.current = *st.current;
  st.pending_request = request.request_id;
  log::get("actors")->info("[supervisor] planning over {}: {}",
                           count_of(static_cast<long long>(request.nodes.size()), "node"), reason);
  request_plan(self, std::move(request));  // deadline, fallback, checks: supervisor_scheduler
  self->become(planning(self));
}

// A state of the supervisor: the whole interface (supervisor_interface.hpp), the same in
// every state but for the three messages whose handlers are given (settle_atom, stage_ready,
// replica_ready).
template <class OnSettle, class OnStageReady, class OnReplicaReady>
supervisor_actor::behavior_type state_of(supervisor* self, OnSettle on_settle,
                                         OnStageReady on_stage_ready,
                                         OnReplicaReady on_replica_ready) {
  return {
    std::move(on_settle),
    std::move(on_stage_ready),
    std::move(on_replica_ready),
    [self](const join_request& x) { admit(self, x); },
    [self](const status_request&) -> cluster_status { return snapshot(self); },
    [self](const zone_heartbeats& x) {
      auto now = self->clock().now();
      for (std::size_t k = 0; k < x.nodes.size() && k < x.ages_ms.size(); ++k) {
        auto i = self->state.nodes.find(x.nodes[k]);
        if (i == self->state.nodes.end())
          continue;
        i->second.heard = true;
        i->second.last_heard = now - std::chrono::milliseconds{x.ages_ms[k]};
      }
    },
    [self](const heartbeat& x) {
      // Heartbeats that came addressed to the supervisor (a node that did not use the zone
      // actor named in its accept): to the zone coordinator that watches the node.
      auto i = self->state.nodes.find(x.node);
      if (i == self->state.nodes.end())
        return;
      if (auto z = self->state.zones.find(i->second.inventory.zone); z != self->state.zones.end())
        self->send(z->second, x);
    },
    [self](const node_lost& x) { lose_node(self, x.node, x.reason, loss_farewell::rejoin); },
    [self](const preemption_notice& x) {
      if (from_the_node(self, x.node, "preemption notice")) {
        tell_preemption(self, x.node, detail::printable(x.reason, 1024), x.seconds_left);
        recovery_notice(self, x.node, "preempted (" + detail::printable(x.reason, 1024) + ")",
                        x.seconds_left);
      }
    },
    [self](const peer_refused& x) { refused(self, x); },
    [self](board_tick_atom) {
      publish_board(self);
      self->delayed_send(self, self->state.options.board_interval, board_tick_atom::value);
    },
    [self](const train_report& x) {
      on_train_report(self, x);
      tell_iteration(self, x);
    },
    [self](drift_replan_atom, const std::string& why) {
      if (self->state.phase != supervisor_phase::running)
        return;
      record(self, "re-planning on drift: " + detail::printable(why, 1024));
      capacity_changed(self, why);
    },
    [self](loop_note_atom, const std::string& text) {
      record(self, detail::printable(text, 1024));
    },
    [self](train_check_atom, std::int64_t version) { on_train_check(self, version); },
    [self](keeper_holds_atom, const std::string& file, const std::string& keeper) {
      checkpoint_held(self, file, keeper);
    },
    [self](recovery_wait_atom, std::int64_t serial) { recovery_deadline(self, serial); },
    [self](leave_deadline_atom, const std::string& name) { recovery_leave_deadline(self, name); },
    [self](startup_deadline_atom, std::int64_t version, std::int64_t serial) {
      on_startup_deadline(self, version, serial);
    },
    [self](const stage_failed& x) {
      if (x.role.plan_version != self->state.plan_version ||
          !from_the_node(self, x.node, "stage failure"))
        return;
      record(self, "stage " + std::to_string(x.role.stage) + " replica " +
                     std::to_string(x.role.replica) + " failed on " + x.node + ": " + x.reason);
      // The node cannot run its role: plan without it.
      lose_node(self, x.node, "stage failed: " + x.reason);
    },
    // The scheduler's requests and the drain deadlines (supervisor_scheduler.cpp).
    [self](const replan_now& x) { return on_replan_now(self, x); },
    [self](const drain_node& x) { return on_drain(self, x); },
    [self](const evict_node& x) { return on_evict(self, x); },
    [self](const placement_rule& x) { return on_rule(self, x); },
    [self](const objective_change& x) { return on_objective(self, x); },
    [self](drain_deadline_atom, const std::string& node) { on_drain_deadline(self, node); },
  };
}

// What the states that do not act on them do with these.
const auto ignore_settle = [](settle_atom) {};  // settle time over after planning started
const auto ignore_stage_ready = [](const stage_ready&) {};      // of a plan no longer current
const auto ignore_replica_ready = [](const replica_ready&) {};  // of a plan no longer current

supervisor_actor::behavior_type collecting(supervisor* self) {
  auto on_settle = [self](settle_atom) {
    auto& st = self->state;
    st.settle_armed = false;
    if (st.phase != supervisor_phase::collecting || st.nodes.empty())
      return;
    start_planning(self, "settle time over with " +
                           count_of(static_cast<long long>(st.nodes.size()), "node"));
  };
  return state_of(self, on_settle, ignore_stage_ready, ignore_replica_ready);
}

supervisor_actor::behavior_type planning(supervisor* self) {
  // Plan replies arrive through the request's continuation.
  return state_of(self, ignore_settle, ignore_stage_ready, ignore_replica_ready);
}

supervisor_actor::behavior_type running(supervisor* self) {
  auto on_stage_ready = [self](const stage_ready& x) {
    auto& st = self->state;
    if (x.role.plan_version != st.plan_version || !from_the_node(self, x.node, "stage report"))
      return;
    auto i = st.nodes.find(x.node);
    if (i == st.nodes.end())
      return;
    ++i->second.ready_roles;
    ++st.roles_ready;
    if (i->second.ready_roles == static_cast<int>(i->second.roles.size()))
      i->second.state = node_state::ready;
    auto g = st.groups.find({x.role.stage, x.role.replica});
    if (g != st.groups.end())
      self->send(g->second, x);
  };
  auto on_replica_ready = [self](const replica_ready& x) {
    auto& st = self->state;
    if (x.plan_version != st.plan_version)
      return;
    ++st.replicas_ready;
    if (st.replicas_ready == static_cast<int>(st.groups.size()) &&
        st.phase == supervisor_phase::assigning) {
      st.phase = supervisor_phase::running;
      log::get("actors")->info("[supervisor] all roles assigned: plan v{}, {} ready on {}",
                               st.plan_version, count_of(st.roles_ready, "stage actor"),
                               count_of(static_cast<long long>(st.nodes.size()), "node"));
      record(self, "all roles assigned and ready (plan v" + std::to_string(st.plan_version) +
                     ", " + count_of(st.roles_ready, "stage actor") + ")");
      startup_advance(self);
    }
  };
  return state_of(self, ignore_settle, on_stage_ready, on_replica_ready);
}

}  // namespace supervision

supervisor_actor::behavior_type
job_supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
               supervisor_options options) {
  using namespace supervision;
  auto& st = self->state;
  st.options = std::move(options);
  supervisor_actor me{self};
  recovery_resume(self);
  attach_keeper(self);
  for (auto& zone : st.options.zones) {
    auto z = self->spawn(zone_coordinator, zone_options{zone, st.options.heartbeat_interval,
                                                        st.options.heartbeat_timeout, me});
    st.zones[zone] = z;
    if (st.options.publish)
      st.options.publish(zone_actor_name(zone), caf::actor_cast<caf::actor>(z));
  }
  self->set_down_handler([self](caf::down_msg& msg) {
    for (auto& [name, node] : self->state.nodes)
      if (node.endpoint.address() == msg.source) {
        auto node_name = name;  // lose_node erases the entry
        lose_node(self, node_name, "endpoint closed (" + caf::to_string(msg.reason) + ")");
        return;
      }
  });
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // The nodes exit 0 only when the job finished: a coordinator stopped before that ended it.
    const bool done = self->state.training.finished();
    const shutdown_notice notice{done ? "the job finished; the coordinator is shutting down"
                                      : "the coordinator is shutting down before the job finished",
                                 done ? shutdown_kind::job_finished : shutdown_kind::stopped};
    for (auto& [name, node] : self->state.nodes)
      self->send(node.endpoint, notice);
    for (auto& [zone, actor] : self->state.zones)
      self->send_exit(actor, msg.reason);
    clear_roles(self);
    self->quit(msg.reason);
  });
  tell_attached(self);
  if (st.options.board)
    self->send(self, board_tick_atom::value);
  if (!st.options.mode_note.empty())
    record(self, st.options.mode_note);
  log::get("actors")->info("[supervisor] collecting nodes: quorum {}, settle {} ms, heartbeat "
                           "{}/{} ms",
                           st.options.quorum, to_ms(st.options.settle),
                           to_ms(st.options.heartbeat_interval), to_ms(st.options.heartbeat_timeout));
  return collecting(self);
}

}  // namespace sailor::actors
