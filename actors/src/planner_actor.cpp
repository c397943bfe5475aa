#include "sailor/actors/planner_actor.hpp"

#include "sailor/config/log.hpp"
#include "sailor/config/text.hpp"

namespace sailor::actors {

caf::behavior planner_actor(caf::stateful_actor<planner_state>* self, planning_function plan) {
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
  };
}

}  // namespace sailor::actors
