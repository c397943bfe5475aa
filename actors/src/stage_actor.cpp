#include "sailor/actors/stage_actor.hpp"

#include "sailor/config/log.hpp"

namespace sailor::actors {

caf::behavior stage_actor(caf::stateful_actor<stage_state>* self, std::string node,
                          stage_role role, caf::actor agent, stage_hook hook) {
  auto& st = self->state;
  st.node = std::move(node);
  st.role = std::move(role);
  st.agent = std::move(agent);
  self->send(self, start_atom::value);
  return {
    [self, hook](start_atom) {
      auto& st = self->state;
      status failed;
      try {
        if (hook)
          failed = hook(st.role);
      } catch (const std::exception& e) {
        failed = sailor::error{error_kind::failed, e.what(), "", 0, ""};
      }
      if (failed) {
        log::get("actors")->error("[{} stage {} replica {} rank {}] cannot take the role: {}",
                                  st.node, st.role.stage, st.role.replica, st.role.tp_rank,
                                  failed->message);
        self->send(st.agent, stage_failed{st.node, st.role, failed->message});
        self->quit();
        return;
      }
      st.ready = true;
      log::get("actors")->debug("[{} stage {} replica {} rank {}] ready on device {}", st.node,
                                st.role.stage, st.role.replica, st.role.tp_rank, st.role.device);
      self->send(st.agent, stage_ready{st.node, st.role});
    },
  };
}

}  // namespace sailor::actors
