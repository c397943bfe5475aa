// A cost-capping scheduler: plans come from the built-in planner (asked for a candidate);
// the scheduler prices every plan applied ($/hour of its devices) and, over budget, evicts
// the node of the most expensive replica. With training, it also prices each iteration from
// the telemetry (measured seconds x $/hour) and holds it to a budget per iteration.
//
// This example starts a coordinator with it (budget $4/hour) and three in-process nodes in
// two zones: two at $1/hour and one at $3/hour. The first plan uses all three ($5/hour); the
// scheduler evicts the expensive one and the job re-plans over the other two ($2/hour).
//
//   build/bin/cost_capping_scheduler [--budget 4.0]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <caf/all.hpp>

#include "sailor/actors/placement.hpp"
#include "sailor/actors/runtime.hpp"
#include "in_process_nodes.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

struct cost_cap_state {
  double budget_per_hour = 4;
  double budget_per_iteration = 0;  ///< 0: none
  std::map<std::string, double> price_per_hour;  ///< by GPU type, per device
  supervisor_port supervisor;
  scheduler_actor builtin;
  double plan_per_hour = 0;
  sailor::config::plan plan;  ///< the plan applied last
  std::string evicted;  ///< the node evicted last (one eviction per plan)
  static inline const char* name = "cost_capping_scheduler";
};
using cost_cap = scheduler_actor::stateful_pointer<cost_cap_state>;

double replica_price(cost_cap self, const sailor::config::replica& r) {
  auto i = self->state.price_per_hour.find(r.gpu_type);
  return (i == self->state.price_per_hour.end() ? 0.0 : i->second) * r.tp;
}

// Over budget: evict the node of the most expensive replica.
void evict_most_expensive(cost_cap self, const sailor::config::plan& p, const std::string& why) {
  const sailor::config::replica* dearest = nullptr;
  for (auto& stage : p.stages)
    for (auto& r : stage.replicas)
      if (!r.nodes.empty() && (!dearest || replica_price(self, r) > replica_price(self, *dearest)))
        dearest = &r;
  if (!dearest || dearest->nodes.front() == self->state.evicted)
    return;
  auto node = dearest->nodes.front();
  self->state.evicted = node;
  std::printf("[cost cap] %s: evicting node %s ($%.2f/hour)\n", why.c_str(), node.c_str(),
              replica_price(self, *dearest));
  self->request(self->state.supervisor, caf::infinite, evict_node{node, why})
    .then([node](const scheduler_answer& a) {
      std::printf("[cost cap] evict %s: %s%s%s\n", node.c_str(),
                  a.accepted ? "accepted" : "refused", a.reason.empty() ? "" : ": ",
                  a.reason.c_str());
    });
}

scheduler_actor::behavior_type cost_capping_scheduler(cost_cap self, double budget,
                                                      double budget_per_iteration) {
  self->state.budget_per_hour = budget;
  self->state.budget_per_iteration = budget_per_iteration;
  self->state.price_per_hour = {{"CPU", 1.0}, {"CPU-XL", 3.0}};
  return {
    // A candidate from the built-in planner, passed on as it is.
    [self](const plan_request& r) -> caf::typed_response_promise<plan_reply> {
      auto promise = self->make_response_promise<plan_reply>();
      self->request(self->state.builtin, 10s, r)
        .then([promise](plan_reply& candidate) mutable { promise.deliver(std::move(candidate)); },
              [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
      return promise;
    },
    [self](const scheduler_attached& x) {
      self->state.supervisor = x.supervisor;
      self->state.builtin = x.builtin;
    },
    [self](const plan_applied& x) {
      double total = 0;
      for (auto& stage : x.plan.stages)
        for (auto& r : stage.replicas)
          total += replica_price(self, r);
      self->state.plan_per_hour = total;
      self->state.plan = x.plan;
      std::printf("[cost cap] plan v%lld: $%.2f/hour (budget $%.2f)\n",
                  static_cast<long long>(x.plan_version), total, self->state.budget_per_hour);
      char why[64];
      std::snprintf(why, sizeof why, "over the budget of $%.2f/hour", self->state.budget_per_hour);
      if (total > self->state.budget_per_hour)
        evict_most_expensive(self, x.plan, why);
    },
    [self](const iteration_telemetry& t) {
      if (t.stage != 0 || t.replica != 0)
        return;  // one line per iteration
      double dollars = self->state.plan_per_hour * t.measured_s / 3600;
      std::printf("[cost cap] iteration %lld: %.3f s (predicted %.3f s), $%.6f\n",
                  static_cast<long long>(t.iteration + 1), t.measured_s, t.predicted_s, dollars);
      if (self->state.budget_per_iteration > 0 && dollars > self->state.budget_per_iteration)
        evict_most_expensive(self, self->state.plan, "over the budget per iteration");
    },
    [](const availability_event&) {}, [](const plan_refused&) {}, [](const replan_finished&) {},
  };
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 4;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: cost_capping_scheduler [--budget DOLLARS_PER_HOUR]\n\nA coordinator "
                  "whose scheduler evicts the most expensive replica while the plan\ncosts more "
                  "than the budget (default 4), with three in-process nodes at $1,\n$1 and "
                  "$3 per hour (control plane only; bounded waits of 20 s).\n");
      return 0;
    }
    char* end = nullptr;
    if (arg == "--budget" && i + 1 < argc && (budget = std::strtod(argv[++i], &end)) > 0 &&
        *end == '\0')
      continue;
    std::fprintf(stderr, "cost_capping_scheduler: bad argument '%s' (try --help)\n", argv[i]);
    return 2;
  }
  runtime_config cfg;
  caf::actor_system system{cfg};
  auto options = examples::tiny_model_coordinator({"local-a", "local-b"}, 3);
  options.supervisor.scheduler = system.spawn(cost_capping_scheduler, budget, 0.0);
  options.plan = [](const plan_request& r) { return even_plan(r.nodes, r.model_layers, 8); };
  auto coord = coordinator::start(system, options);
  if (!coord) {
    std::fprintf(stderr, "cannot start the coordinator: %s\n", coord.error().message.c_str());
    return 1;
  }
  auto port = (*coord)->port();
  auto nodes = examples::start_nodes(
    system, port, {{"a1", "local-a", "CPU"}, {"a2", "local-a", "CPU"}, {"b1", "local-b", "CPU-XL"}});
  if (!nodes) {
    std::fprintf(stderr, "%s\n", nodes.error().message.c_str());
    return 1;
  }
  // Under budget: a second plan, running, without b1.
  auto done = examples::wait_for(system, port, [](const cluster_status& s) {
    if (s.phase != "running" || s.plan_version < 2)
      return false;
    for (auto& n : s.nodes)
      if (n.inventory.name == "b1")
        return false;
    return true;
  });
  if (!done) {
    std::fprintf(stderr, "the job did not get under budget within 20 s\n");
    return 1;
  }
  std::printf("under budget: plan v%lld\n%s\n", static_cast<long long>(done->plan_version),
              done->plan_summary.c_str());
  return 0;
}
