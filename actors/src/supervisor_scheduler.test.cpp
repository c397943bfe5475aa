// The scheduler protocol (scheduler_api.hpp) from the supervisor's side, under the
// deterministic scheduler: plans checked before any node acts, the built-in planner taking
// over a late or refused decision, what the scheduler is told, and its requests answered.
#include <doctest/doctest.h>

#include <caf/typed_response_promise.hpp>

#include "supervisor_fixture.hpp"
#include "supervisor_scheduler.hpp"

namespace {

// What a test scheduler saw.
struct seen {
  std::vector<plan_request> requests;
  std::vector<plan_refused> refusals;
  std::vector<plan_applied> applied;
  std::vector<replan_finished> finished;
  std::vector<iteration_telemetry> telemetry;
  std::vector<availability_event> events;
  std::optional<scheduler_attached> attached;
};

// Answers a request (nothing: never answers).
using answer_fn = std::function<std::optional<plan_reply>(const plan_request&)>;

struct test_scheduler_state {
  std::vector<caf::typed_response_promise<plan_reply>> held;  ///< requests never answered
  static inline const char* name = "test_scheduler";
};

scheduler_actor::behavior_type
test_scheduler(scheduler_actor::stateful_pointer<test_scheduler_state> self,
               std::shared_ptr<seen> log, answer_fn answer) {
  return {
    [self, log, answer](const plan_request& r) -> caf::typed_response_promise<plan_reply> {
      log->requests.push_back(r);
      auto promise = self->make_response_promise<plan_reply>();
      if (auto reply = answer(r))
        promise.deliver(std::move(*reply));
      else
        self->state.held.push_back(promise);
      return promise;
    },
    [log](const scheduler_attached& x) { log->attached = x; },
    [log](const availability_event& x) { log->events.push_back(x); },
    [log](const iteration_telemetry& x) { log->telemetry.push_back(x); },
    [log](const plan_applied& x) { log->applied.push_back(x); },
    [log](const plan_refused& x) { log->refusals.push_back(x); },
    [log](const replan_finished& x) { log->finished.push_back(x); },
  };
}

struct with_scheduler : deterministic {
  std::shared_ptr<seen> log = std::make_shared<seen>();
  scheduler_actor builtin;
  scheduler_actor scheduler;

  // The schedulers hold promises (a cycle through themselves): they end here.
  ~with_scheduler() {
    if (scheduler)
      caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
    if (builtin)
      caf::anon_send_exit(builtin, caf::exit_reason::user_shutdown);
  }

  // `answer` as the scheduler, with (or without) the built-in planner beside it.
  void start_with(answer_fn answer, bool with_builtin, supervisor_options o) {
    if (with_builtin) {
      builtin = system.spawn(planner_actor, [](const plan_request& r) {
        return even_plan(r.nodes, 6, 8);
      });
      o.builtin = builtin;
    }
    o.model_layers = 6;
    scheduler = system.spawn(test_scheduler, log, std::move(answer));
    start(o, scheduler);
  }

  template <class Request>
  scheduler_answer ask(Request x) {
    REQUIRE(log->attached);
    auto out = std::make_shared<std::optional<scheduler_answer>>();
    auto port = log->attached->supervisor;
    system.spawn([port, x, out](caf::event_based_actor* self) {
      self->request(port, caf::infinite, x).then([out](scheduler_answer& a) { *out = a; });
    });
    sched.run();
    REQUIRE(out->has_value());
    return **out;
  }

  // No node was given a role (only the release of the void plan, if anything).
  bool no_roles_handed_out() {
    for (auto& [name, l] : logs)
      for (auto& a : l->assignments)
        if (!a.roles.empty())
          return false;
    return true;
  }

  cluster_status status() {
    auto out = std::make_shared<cluster_status>();
    system.spawn([this, out](caf::event_based_actor* self) {
      self->request(supervisor, caf::infinite, status_request{})
        .then([out](cluster_status& s) { *out = s; });
    });
    sched.run();
    return *out;
  }
};

answer_fn even() {
  return [](const plan_request& r) -> std::optional<plan_reply> {
    auto p = even_plan(r.nodes, 6, 8);
    return p ? plan_reply::success(r.request_id, *p) : plan_reply::failure(r.request_id, "none");
  };
}

// An even plan, then `spoil` applied to it.
answer_fn spoiled(std::function<void(sailor::config::plan&)> spoil) {
  return [spoil](const plan_request& r) -> std::optional<plan_reply> {
    auto p = even_plan(r.nodes, 6, 8);
    REQUIRE(p);
    spoil(*p);
    return plan_reply::success(r.request_id, *p);
  };
}

}  // namespace

TEST_CASE_FIXTURE(with_scheduler, "scheduler: a plan that leaves a layer out is refused before any node acts, the scheduler told why, and status shows it") {
  start_with(spoiled([](sailor::config::plan& p) { p.stages.pop_back(); }), false,
             options(4));
  join_four();
  CHECK(state().phase == supervisor_phase::waiting);
  CHECK(no_roles_handed_out());
  REQUIRE(log->refusals.size() == 1);
  CHECK(log->refusals[0].reason.find("cover layers 0..4 of a model of 6 layers") !=
        std::string::npos);
  auto s = status();
  CHECK(s.plan_summary.find("plan refused: the stages cover layers 0..4") != std::string::npos);
  CHECK(has_event("plan from the scheduler refused"));
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: a plan on a node that has not joined or on too small a device is refused, and the built-in planner decides instead") {
  SUBCASE("a node that has not joined") {
    start_with(spoiled([](sailor::config::plan& p) {
                 p.stages[0].replicas[0].nodes = {"ghost"};
                 p.stages[0].replicas[0].devices = {0};
               }),
               true, options(4));
    join_four();
    REQUIRE(log->refusals.size() == 1);
    CHECK(log->refusals[0].reason.find("uses node 'ghost'") != std::string::npos);
  }
  SUBCASE("memory") {
    start_with(spoiled([](sailor::config::plan& p) {
                 p.estimate = sailor::config::plan_estimate{};
                 p.estimate->peak_memory_bytes = 3.0 * (1ull << 30);  // devices hold 1 GiB
               }),
               true, options(4));
    for (auto [name, zone] : {std::pair{"n1", "a"}, {"n2", "a"}, {"n3", "b"}, {"n4", "b"}})
      join(name, zone, 2, protocol_version, false, "cuda");  // 1 GiB each
    REQUIRE(log->refusals.size() == 1);
    CHECK(log->refusals[0].reason.find("predicted peak memory 3.00 GiB does not fit its "
                                       "largest device") != std::string::npos);
  }
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().sched.fallbacks == 1);
  REQUIRE(log->applied.size() == 1);
  CHECK(log->applied[0].by == "built-in planner");
  CHECK(log->applied[0].plan.num_stages() == 4);
  CHECK(has_event("the built-in planner decides request 1"));
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: one that does not answer within its deadline is replaced by the built-in planner for that decision") {
  auto o = options(4);
  o.plan_timeout = 2s;
  int asked = 0;
  start_with([&asked](const plan_request& r) -> std::optional<plan_reply> {
               // Silent the first time only: the next decision is the scheduler's again.
               if (asked++ == 0)
                 return std::nullopt;
               auto p = even_plan(r.nodes, 6, 8);
               return plan_reply::success(r.request_id, *p);
             },
             true, o);
  join_four();
  CHECK(state().phase == supervisor_phase::planning);
  run_for(2100ms);
  REQUIRE(state().phase == supervisor_phase::running);
  CHECK(has_event("the scheduler did not answer within 2000 ms; the built-in planner decides"));
  REQUIRE(log->applied.size() == 1);
  CHECK(log->applied[0].by == "built-in planner");
  // The plan started: the recovery took the deadline and more.
  REQUIRE(log->finished.size() == 1);
  CHECK(log->finished[0].recovery_s >= 2.0);
  // The next decision is the scheduler's.
  caf::anon_send_exit(fakes["n4"], caf::exit_reason::kill);
  sched.run();
  REQUIRE(log->applied.size() == 2);
  CHECK(log->applied[1].by == "scheduler");
  CHECK(log->applied[1].plan_version == state().plan_version);
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: it is told of joins, preemption notices, losses, the plan applied and its start") {
  start_with(even(), false, options(4));
  join_four();
  REQUIRE(log->attached);
  CHECK(!log->attached->builtin);
  CHECK(log->events.size() == 4);
  caf::anon_send(fakes["n4"], preempt_atom::value);
  sched.run();
  REQUIRE(log->events.size() == 6);
  CHECK(log->events[4].kind == availability_kind::preemption_notice);
  CHECK(log->events[4].node.name == "n4");
  CHECK(log->events[4].deadline_ms == 2500);  // the notice's seconds left, as it came
  CHECK(log->events[5].kind == availability_kind::lost);
  CHECK(log->events[5].reason.find("preempted") != std::string::npos);
  REQUIRE(log->applied.size() == 2);
  CHECK(log->applied[1].plan_version == 2);
  REQUIRE(log->finished.size() == 2);
  CHECK(log->finished[1].plan_version == 2);
  CHECK(log->finished[1].reason == "node n4 lost");
  CHECK(log->requests.back().nodes.size() == 3);
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: its requests are answered, and a refused one changes nothing") {
  start_with(even(), false, options(4));
  join_four();
  REQUIRE(state().plan_version == 1);
  SUBCASE("evict") {
    auto no = ask(evict_node{"n9", "too dear"});
    CHECK(!no.accepted);
    CHECK(no.reason == "evict: node 'n9' has not joined");
    CHECK(state().plan_version == 1);
    auto yes = ask(evict_node{"n4", "too dear"});
    CHECK(yes.accepted);
    CHECK(!state().nodes.count("n4"));
    CHECK(state().plan_version == 2);
    CHECK(has_event("node n4 lost: evicted by the scheduler: too dear"));
  }
  SUBCASE("re-plan now") {
    CHECK(ask(replan_now{"measured speed changed"}).accepted);
    CHECK(state().plan_version == 2);
    CHECK(log->requests.back().reason == "the scheduler asked: measured speed changed");
  }
  SUBCASE("drain: the next plan leaves the node out, then it is let go") {
    auto bad = ask(drain_node{"n1", -5});
    CHECK(!bad.accepted);
    CHECK(bad.reason.find("deadline_ms is -5") != std::string::npos);
    CHECK(ask(drain_node{"n1", 0}).accepted);
    CHECK(state().plan_version == 2);
    CHECK(log->requests.back().nodes.size() == 3);
    CHECK(!state().nodes.count("n1"));  // the plan without it started
    CHECK(logs["n1"]->shut_down);
    CHECK(logs["n1"]->farewell == shutdown_kind::released);  // let go: it does not join again
    CHECK(has_event("node n1 let go: drained by the scheduler"));
  }
  SUBCASE("placement rules") {
    CHECK(!ask(placement_rule{static_cast<placement_kind>(7), "n1", 0}).accepted);
    CHECK(!ask(placement_rule{placement_kind::pin, "n1", -1}).accepted);
    // Forbidding n1 everywhere leaves it out of plans: the running plan breaks it.
    CHECK(ask(placement_rule{placement_kind::forbid, "n1", -1}).accepted);
    CHECK(state().plan_version == 2);
    CHECK(state().nodes.at("n1").roles.empty());
    REQUIRE(log->requests.back().rules.size() == 1);
    CHECK(ask(placement_rule{placement_kind::clear, "n1", -1}).accepted);
    CHECK(state().sched.rules.empty());
  }
  SUBCASE("objective") {
    auto no = ask(objective_change{"max_cost_per_hour", "cheap"});
    CHECK(!no.accepted);
    CHECK(no.reason == "objective_change: max_cost_per_hour 'cheap', expected a number >= 0");
    CHECK(!ask(objective_change{"colour", "red"}).accepted);
    CHECK(state().plan_version == 1);
    CHECK(ask(objective_change{"max_cost_per_hour", "12.5"}).accepted);
    CHECK(state().plan_version == 2);
    REQUIRE(log->requests.back().objective.size() == 1);
    CHECK(log->requests.back().objective[0] == "max_cost_per_hour=12.5");
  }
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: per-iteration telemetry per stage and replica with the plan's prediction") {
  auto o = options(4);
  o.prepare_training = [](training_job& j, const checkpoint_holdings&) {
    j.iterations = 10;
    j.predicted_iteration_s = 0.25;
    return true;
  };
  start_with(even(), false, o);
  join_four();
  REQUIRE(state().phase == supervisor_phase::running);
  for (auto& [name, node] : state().nodes)
    for (auto& role : node.roles) {
      train_report r;
      r.plan_version = state().plan_version;
      r.node = name;
      r.stage = role.stage;
      r.replica = role.replica;
      r.tp_rank = role.tp_rank;
      r.iteration = 0;
      r.total_s = 0.5;
      r.compute_s = 0.3;
      r.loss = 2.5;
      caf::anon_send(fakes.at(name), r);
    }
  sched.run();
  REQUIRE(log->telemetry.size() == 8);  // 4 stages x 2 replicas
  for (auto& t : log->telemetry) {
    CHECK(t.measured_s == doctest::Approx(0.5));
    CHECK(t.predicted_s == doctest::Approx(0.25));
    CHECK(t.plan_version == 1);
  }
  // A report forged by another node is not passed on.
  train_report forged;
  forged.plan_version = 1;
  forged.node = "n1";
  caf::anon_send(fakes.at("n2"), forged);
  sched.run();
  CHECK(log->telemetry.size() == 8);
}

namespace {

// Asks the built-in planner for a candidate, then adjusts it: recomputation everywhere.
struct delegating_state {
  scheduler_actor builtin;
  static inline const char* name = "delegating_scheduler";
};

scheduler_actor::behavior_type
delegating_scheduler(scheduler_actor::stateful_pointer<delegating_state> self) {
  return {
    [self](const plan_request& r) -> caf::typed_response_promise<plan_reply> {
      auto promise = self->make_response_promise<plan_reply>();
      self->request(self->state.builtin, caf::infinite, r)
        .then([promise](plan_reply& candidate) mutable {
          for (auto& stage : candidate.plan.stages)
            stage.recompute = true;
          promise.deliver(std::move(candidate));
        });
      return promise;
    },
    [self](const scheduler_attached& x) { self->state.builtin = x.builtin; },
    [](const availability_event&) {}, [](const iteration_telemetry&) {},
    [](const plan_applied&) {}, [](const plan_refused&) {}, [](const replan_finished&) {},
  };
}

}  // namespace

TEST_CASE_FIXTURE(deterministic, "scheduler: a custom scheduler asks the built-in planner for a candidate and adjusts it") {
  auto o = options(4);
  o.builtin = system.spawn(planner_actor, [](const plan_request& r) {
    return even_plan(r.nodes, 6, 8);
  });
  start(o, system.spawn(delegating_scheduler));
  join_four();
  REQUIRE(state().phase == supervisor_phase::running);
  REQUIRE(state().current->num_stages() == 4);
  for (auto& stage : state().current->stages)
    CHECK(stage.recompute);
  caf::anon_send_exit(o.builtin, caf::exit_reason::user_shutdown);
}

TEST_CASE("scheduler: plan checks name what is wrong") {
  std::vector<node_inventory> nodes{{"n1", "a", "CPU", "h", {{0, "cpu", 1ull << 30}}}};
  auto p = even_plan(nodes, 6, 8);
  REQUIRE(p);
  CHECK(!sailor::actors::supervision::plan_refusal(*p, nodes, {}, 6));
  auto gap = *p;
  gap.stages[0].first_layer = 1;
  CHECK(*sailor::actors::supervision::plan_refusal(gap, nodes, {}, 6) ==
        "stage 0 starts at layer 1, expected 0 (every layer in exactly one stage)");
  CHECK(sailor::actors::supervision::plan_refusal(*p, nodes, {{placement_kind::forbid, "n1", -1}}, 6)
          ->find("which a rule forbids") != std::string::npos);
  CHECK(sailor::actors::supervision::plan_refusal(*p, nodes, {{placement_kind::pin, "n2", 0}}, 6)
          ->find("pinning stage 0 to node n2 is broken") != std::string::npos);
  // CPU devices' memory is a share of the host's: not held against the estimate.
  auto heavy = *p;
  heavy.estimate = sailor::config::plan_estimate{};
  heavy.estimate->peak_memory_bytes = 3.0 * (1ull << 30);
  CHECK(!sailor::actors::supervision::plan_refusal(heavy, nodes, {}, 6));
  nodes[0].devices[0].kind = "cuda";
  CHECK(sailor::actors::supervision::plan_refusal(heavy, nodes, {}, 6)
          ->find("does not fit its largest device (device 0 of node n1, 1.00 GiB)") !=
        std::string::npos);
  CHECK(sailor::actors::supervision::plan_refusal(sailor::config::plan{}, nodes, {}, 6) ==
        std::string("the plan has no stages"));
  // More devices than a role assignment carries (protocol/limits.hpp): refused before any
  // node is told, not sent for every node to refuse.
  auto wide = *p;
  wide.stages[0].replicas.assign(8193, sailor::config::replica{"CPU", "a", 1, {"n1"}, {0}});
  std::size_t devices = 0;
  for (auto& stage : wide.stages)
    for (auto& r : stage.replicas) devices += r.nodes.size();
  CHECK(sailor::actors::supervision::plan_refusal(wide, nodes, {}, 6) ==
        "the plan has " + std::to_string(wide.stages.size()) + " stages on " +
          std::to_string(devices) +
          " devices, more than a role assignment carries (at most 64 stages, 8192 devices)");
}

TEST_CASE_FIXTURE(with_scheduler, "scheduler: when it dies the job stays on its last plan, and the built-in planner takes the next decision") {
  start_with(even(), true, options(4));
  join_four();
  REQUIRE(state().plan_version == 1);
  auto first = *state().current;
  caf::anon_send_exit(scheduler, caf::exit_reason::kill);
  sched.run();
  run_for(1s);
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().plan_version == 1);
  CHECK(describe_plan(*state().current) == describe_plan(first));
  caf::anon_send_exit(fakes["n4"], caf::exit_reason::kill);
  sched.run();
  CHECK(state().phase == supervisor_phase::running);
  CHECK(state().plan_version == 2);
  CHECK(state().sched.fallbacks == 1);
  CHECK(has_event("the scheduler failed"));
}
