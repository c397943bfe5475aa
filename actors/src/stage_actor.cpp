#include "sailor/actors/stage_actor.hpp"

#include <caf/send.hpp>

#include "sailor/config/log.hpp"

namespace sailor::actors {

caf::behavior stage_actor(caf::stateful_actor<stage_state>* self, std::string node,
                          stage_role role, node_agent_actor agent, stage_hook hook) {
  auto& st = self->state;
  st.node = std::move(node);
  st.role = std::move(role);
  st.agent = std::move(agent);
  self->send(self, start_atom::value);
  auto report_ready = [self] {
    auto& st = self->state;
    st.ready = true;
    log::get("actors")->debug("[{} stage {} replica {} rank {}] ready on device {}", st.node,
                              st.role.stage, st.role.replica, st.role.tp_rank, st.role.device);
    self->send(st.agent, stage_ready{st.node, st.role});
  };
  return {
    [self, hook, report_ready](start_atom) {
      auto& st = self->state;
      if (!hook)
        return report_ready();
      // The work tells this actor from its own thread; a weak handle, as the work may outlive
      // the actor by the time its thread notices it should stop.
      auto me = caf::actor_cast<caf::weak_actor_ptr>(self->ctrl());
      stage_ready_fn ready = [me] {
        if (auto strong = caf::actor_cast<caf::actor>(me.lock()))
          caf::anon_send(strong, ready_atom::value);
      };
      result<std::unique_ptr<stage_work>> work = std::unique_ptr<stage_work>{};
      try {
        work = hook(st.role, std::move(ready));
      } catch (const std::exception& e) {
        work = sailor::error::failed(e.what());
      }
      if (!work) {
        log::get("actors")->error("[{} stage {} replica {} rank {}] cannot take the role: {}",
                                  st.node, st.role.stage, st.role.replica, st.role.tp_rank,
                                  work.error().message);
        self->send(st.agent, stage_failed{st.node, st.role, work.error().message});
        self->quit();
        return;
      }
      st.work = std::move(*work);
      if (!st.work)
        report_ready();
    },
    [self, report_ready](ready_atom) {
      if (!self->state.ready)
        report_ready();
    },
  };
}

}  // namespace sailor::actors
