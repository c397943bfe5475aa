#include "sailor/actors/planner_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_response_promise.hpp>

#include "sailor/config/log.hpp"
#include "sailor/config/text.hpp"

namespace sailor::actors {

scheduler_actor::behavior_type planner_actor(planner_pointer self, planning_function plan) {
  self->state.plan = std::move(plan);
  return {
    [self](const plan_request& request) -> plan_reply {
      auto log = log::get("actors");
      // The planning function may come from other code: no exception leaves the handler.
      try {
        auto chosen = self->state.plan(request);
        if (!chosen) {
          ++self->state.plans_failed;
          log->warn("[planner] request {} ({}): no plan: {}", request.request_id, request.reason,
                    chosen.error().message);
          return plan_reply::failure(request.request_id, chosen.error().message);
        }
        ++self->state.plans_made;
        log->info("[planner] request {} ({}): plan with {} over {}", request.request_id,
                  request.reason, count_of(chosen->num_stages(), "stage"),
                  count_of(static_cast<long long>(request.nodes.size()), "node"));
        return plan_reply::success(request.request_id, std::move(*chosen));
      } catch (const std::exception& e) {
        ++self->state.plans_failed;
        log->error("[planner] request {}: planning threw: {}", request.request_id, e.what());
        return plan_reply::failure(request.request_id, std::string("planner failed: ") + e.what());
      }
    },
    [self](const availability_event&) { ++self->state.events_seen; },
    [self](const scheduler_attached&) {},
    [self](const iteration_telemetry&) {},
    [self](const plan_applied&) {},
    [self](const plan_refused&) {},
    [self](const replan_finished&) {},
  };
}

scheduler_actor adapt_scheduler(caf::actor_system& system, caf::actor plain) {
  auto adapter = system.spawn([plain](scheduler_actor::pointer self)
                                -> scheduler_actor::behavior_type {
    self->monitor(plain);
    self->set_down_handler([self](caf::down_msg& msg) { self->quit(msg.reason); });
    return {
      [self, plain](plan_request& request) -> caf::typed_response_promise<plan_reply> {
        auto promise = self->make_response_promise<plan_reply>();
        self->request(plain, caf::infinite, std::move(request))
          .then([promise](plan_reply& reply) mutable { promise.deliver(std::move(reply)); },
                [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
        return promise;
      },
      [plain](availability_event& event) { caf::anon_send(plain, std::move(event)); },
      [](const scheduler_attached&) {},
      [](const iteration_telemetry&) {},
      [](const plan_applied&) {},
      [](const plan_refused&) {},
      [](const replan_finished&) {},
    };
  });
  return adapter;
}

}  // namespace sailor::actors
