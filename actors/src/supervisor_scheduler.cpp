// The job supervisor's side of the scheduler protocol (scheduler_api.hpp): asking for plans
// with a deadline and a fallback, checking them, telling the scheduler what happens, and
// answering its requests.

#include <cmath>
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "peer_checks.hpp"
#include "sailor/actors/zone_coordinator.hpp"
#include "sailor/config/log.hpp"
#include "supervisor_scheduler.hpp"

namespace sailor::actors::supervision {
namespace {

double seconds_since(supervisor* self, caf::actor_clock::time_point t) {
  return std::chrono::duration<double>(self->clock().now() - t).count();
}

std::vector<node_inventory> plannable(supervisor* self) {
  std::vector<node_inventory> out;
  for (auto& [name, node] : self->state.nodes)
    if (!excluded_from_plans(self, name))
      out.push_back(node.inventory);
  return out;
}

void ask(supervisor* self, scheduler_actor who, plan_request request, bool fallback);

// The built-in planner takes over the decision of `request`, when there is one.
bool fall_back(supervisor* self, const plan_request& request, const std::string& why) {
  auto& st = self->state;
  if (!st.options.builtin || st.options.builtin == st.options.scheduler)
    return false;
  ++st.sched.fallbacks;
  log::get("actors")->warn("[supervisor] request {}: {}; the built-in planner decides instead",
                           request.request_id, why);
  record(self, "scheduler: " + why + "; the built-in planner decides request " +
                 std::to_string(request.request_id));
  ask(self, st.options.builtin, request, true);
  return true;
}

void on_reply(supervisor* self, const plan_request& request, plan_reply reply, bool fallback) {
  auto& st = self->state;
  if (reply.request_id != st.pending_request || st.capacity_changed || !reply.ok) {
    on_plan(self, std::move(reply));  // stale, overtaken, or no plan: on_plan decides
    return;
  }
  const auto by = fallback ? "built-in planner" : "scheduler";
  if (auto why = plan_refusal(reply.plan, plannable(self), st.sched.rules,
                              st.options.model_layers)) {
    ++st.sched.refused_plans;
    st.sched.last_refusal = *why;
    log::get("actors")->warn("[supervisor] refused the {}'s plan for request {}: {}", by,
                             request.request_id, *why);
    record(self, std::string("plan from the ") + by + " refused: " + *why);
    auto* sched = fallback ? &st.options.builtin : &st.options.scheduler;
    self->send(*sched, plan_refused{request.request_id, *why});
    if (fallback || !fall_back(self, request, "its plan was refused (" + *why + ")"))
      on_plan(self, plan_reply::failure(request.request_id, "plan refused: " + *why));
    return;
  }
  st.sched.plan_by = by;
  on_plan(self, std::move(reply));
}

void ask(supervisor* self, scheduler_actor who, plan_request request, bool fallback) {
  auto timeout = self->state.options.plan_timeout;
  self->request(who, timeout, request)
    .then(
      [self, request, fallback](plan_reply& reply) {
        on_reply(self, request, std::move(reply), fallback);
      },
      [self, request, fallback, timeout](caf::error& err) {
        if (request.request_id != self->state.pending_request)
          return;
        auto why = err == caf::sec::request_timeout
                     ? fmt::format("the scheduler did not answer within {} ms", to_ms(timeout))
                     : "the scheduler failed: " + self->system().render(err);
        if (fallback || !fall_back(self, request, why))
          on_plan(self, plan_reply::failure(request.request_id, why));
      });
}

// A drained node leaves: no re-plan (it holds no role of the plan that runs).
void let_go(supervisor* self, const std::string& name, const std::string& why) {
  auto& st = self->state;
  auto i = st.nodes.find(name);
  st.sched.drained.erase(name);
  if (i == st.nodes.end())
    return;
  if (!i->second.roles.empty()) {
    lose_node(self, name, why);  // still in the plan (the deadline came first)
    return;
  }
  auto node = std::move(i->second);
  st.nodes.erase(i);
  log::get("actors")->info("[supervisor] node {} let go: {}", name, why);
  record(self, "node " + name + " let go: " + why);
  release_node(self, node, why, why);
}

scheduler_answer accepted(std::string why = {}) { return {true, std::move(why)}; }
scheduler_answer refused(supervisor* self, std::string why) {
  log::get("actors")->warn("[supervisor] refused a scheduler request: {}", why);
  record(self, "refused a scheduler request: " + why);
  return {false, std::move(why)};
}

bool joined(supervisor* self, const std::string& node) { return self->state.nodes.count(node); }

}  // namespace

scheduler_answer on_drain(supervisor* self, const drain_node& x) {
  auto& st = self->state;
  if (!joined(self, x.node))
    return refused(self, "drain: node '" + detail::printable(x.node) + "' has not joined");
  if (x.deadline_ms < 0)
    return refused(self, "drain: deadline_ms is " + std::to_string(x.deadline_ms) +
                           ", expected 0 or more");
  if (!st.sched.drained.insert(x.node).second)
    return accepted("node " + x.node + " is already draining");
  record(self, "scheduler drains node " + x.node +
                 (x.deadline_ms > 0 ? " (deadline " + std::to_string(x.deadline_ms) + " ms)" : ""));
  if (x.deadline_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds{x.deadline_ms}, drain_deadline_atom::value,
                       x.node);
  if (st.nodes.at(x.node).roles.empty() && st.phase != supervisor_phase::planning)
    let_go(self, x.node, "drained by the scheduler");
  else
    capacity_changed(self, "node " + x.node + " drained");
  return accepted();
}

scheduler_answer on_rule(supervisor* self, const placement_rule& x) {
  auto& st = self->state;
  using kind = placement_kind;
  if (x.kind != kind::pin && x.kind != kind::forbid && x.kind != kind::clear)
    return refused(self, "placement_rule: kind " + std::to_string(static_cast<int>(x.kind)) +
                           ", expected pin, forbid or clear");
  if (x.node.empty())
    return refused(self, "placement_rule: node is empty");
  if (x.kind == kind::pin && (x.stage < 0 || !joined(self, x.node)))
    return refused(self, "placement_rule: pin needs a stage >= 0 (got " +
                           std::to_string(x.stage) + ") and a joined node ('" +
                           detail::printable(x.node) + "')");
  auto& rules = st.sched.rules;
  auto same = [&x](const placement_rule& r) {
    return r.node == x.node && (x.stage < 0 || r.stage == x.stage);
  };
  rules.erase(std::remove_if(rules.begin(), rules.end(), same), rules.end());
  if (x.kind != kind::clear)
    rules.push_back(x);
  record(self, std::string("scheduler rule: ") + to_string(x.kind) + " node " + x.node +
                 (x.stage >= 0 ? " stage " + std::to_string(x.stage) : ""));
  // The plan that runs is checked against the new rules: re-planned when it breaks one.
  if (st.current && plan_refusal(*st.current, plannable(self), rules, 0))
    capacity_changed(self, "placement rules changed");
  return accepted();
}

scheduler_answer on_objective(supervisor* self, const objective_change& x) {
  auto& st = self->state;
  if (x.key == "objective") {
    if (x.value != "throughput" && x.value != "cost")
      return refused(self, "objective_change: objective '" + detail::printable(x.value) +
                             "', expected throughput or cost");
  } else if (x.key == "max_cost_per_hour" || x.key == "min_throughput") {
    char* end = nullptr;
    double v = std::strtod(x.value.c_str(), &end);
    if (x.value.empty() || *end != '\0' || !(v >= 0))
      return refused(self, "objective_change: " + x.key + " '" + detail::printable(x.value) +
                             "', expected a number >= 0");
  } else {
    return refused(self, "objective_change: unknown key '" + detail::printable(x.key) +
                           "' (known: objective, max_cost_per_hour, min_throughput)");
  }
  st.sched.objective[x.key] = x.value;
  record(self, "scheduler sets " + x.key + " = " + x.value);
  if (st.current)
    capacity_changed(self, x.key + " changed to " + x.value);
  return accepted();
}

scheduler_answer on_replan_now(supervisor* self, const replan_now& x) {
  if (self->state.nodes.empty())
    return refused(self, "replan_now: no node has joined");
  auto why = "the scheduler asked: " + detail::printable(x.reason);
  record(self, "re-plan: " + why);
  capacity_changed(self, why);
  if (self->state.phase == supervisor_phase::collecting)  // before quorum: plan now all the same
    start_planning(self, why);
  return accepted();
}

scheduler_answer on_evict(supervisor* self, const evict_node& x) {
  if (!joined(self, x.node))
    return refused(self, "evict: node '" + detail::printable(x.node) + "' has not joined");
  lose_node(self, x.node, "evicted by the scheduler: " + detail::printable(x.reason));
  return accepted();
}

void on_drain_deadline(supervisor* self, const std::string& node) {
  if (self->state.sched.drained.count(node))
    let_go(self, node, "drain deadline passed");
}

void request_plan(supervisor* self, plan_request request) {
  auto& s = self->state.sched;
  if (!s.recovering) {
    s.recovering = true;
    s.recovery_reason = request.reason;
    s.recovery_began = self->clock().now();
  }
  request.nodes = plannable(self);
  request.rules = s.rules;
  request.model_layers = self->state.options.model_layers;
  for (auto& [key, value] : s.objective)
    request.objective.push_back(key + "=" + value);
  ask(self, self->state.options.scheduler, std::move(request), false);
}

bool excluded_from_plans(supervisor* self, const std::string& name) {
  auto& s = self->state.sched;
  if (s.drained.count(name))
    return true;
  return std::any_of(s.rules.begin(), s.rules.end(), [&name](const placement_rule& r) {
    return r.kind == placement_kind::forbid && r.stage < 0 && r.node == name;
  });
}

void tell_attached(supervisor* self) {
  auto& st = self->state;
  if (st.options.scheduler)
    self->send(st.options.scheduler,
               scheduler_attached{supervisor_port{self}, st.options.builtin});
}

void tell_preemption(supervisor* self, const std::string& node, const std::string& reason,
                     double seconds_left) {
  auto& st = self->state;
  auto i = st.nodes.find(node);
  if (i != st.nodes.end() && st.options.scheduler)
    self->send(st.options.scheduler,
               availability_event{availability_kind::preemption_notice, i->second.inventory, reason,
                                  std::llround(seconds_left * 1000.0)});
}

void tell_plan_applied(supervisor* self) {
  auto& st = self->state;
  if (st.options.scheduler && st.current)
    self->send(st.options.scheduler, plan_applied{st.plan_version, *st.current,
                                                  st.sched.plan_by.empty() ? "scheduler"
                                                                           : st.sched.plan_by});
  st.sched.plan_by.clear();
}

void tell_plan_started(supervisor* self) {
  auto& st = self->state;
  // Drained nodes the new plan left out go now.
  std::vector<std::string> go;
  for (auto& name : st.sched.drained)
    if (auto i = st.nodes.find(name); i != st.nodes.end() && i->second.roles.empty())
      go.push_back(name);
  for (auto& name : go)
    let_go(self, name, "drained by the scheduler");
  if (!st.sched.recovering)
    return;
  st.sched.recovering = false;
  auto took = seconds_since(self, st.sched.recovery_began);
  log::get("actors")->info("[supervisor] re-plan to v{} took {:.3f} s ({})", st.plan_version,
                           took, st.sched.recovery_reason);
  if (st.options.scheduler)
    self->send(st.options.scheduler,
               replan_finished{st.plan_version, st.sched.recovery_reason, took});
}

void tell_iteration(supervisor* self, const train_report& x) {
  auto& st = self->state;
  if (!st.options.scheduler || x.what() != report_kind::iteration || x.tp_rank != 0 ||
      x.plan_version != st.plan_version)
    return;
  auto i = st.nodes.find(x.node);
  if (i == st.nodes.end() || !sent_by(self, i->second.endpoint))
    return;  // on_train_report logs a forged report
  ++st.sched.telemetry_sent;
  self->send(st.options.scheduler,
             iteration_telemetry{x.plan_version, x.iteration, x.node, x.stage, x.replica,
                                 x.total_s, x.compute_s, x.send_wait_s + x.recv_wait_s,
                                 x.all_reduce_s, st.training.predicted_s(), x.loss});
}

}  // namespace sailor::actors::supervision
