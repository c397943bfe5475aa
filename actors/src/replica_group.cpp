#include "sailor/actors/replica_group.hpp"

namespace sailor::actors {

replica_group_actor::behavior_type
replica_group(replica_group_actor::stateful_pointer<replica_group_state> self,
              std::int64_t plan_version, int stage, int replica, int tp,
              supervisor_actor supervisor) {
  auto& st = self->state;
  st.plan_version = plan_version;
  st.stage = stage;
  st.replica = replica;
  st.tp = tp;
  st.supervisor = std::move(supervisor);
  return {
    [self](const stage_ready& x) {
      auto& st = self->state;
      if (x.role.plan_version != st.plan_version || x.role.tp_rank < 0 || x.role.tp_rank >= st.tp)
        return;
      if (!st.ready_ranks.insert(x.role.tp_rank).second)
        return;
      if (static_cast<int>(st.ready_ranks.size()) == st.tp) {
        self->send(st.supervisor, replica_ready{st.plan_version, st.stage, st.replica});
        // [complete]: further reports are duplicates.
        self->become(replica_group_actor::behavior_type{[](const stage_ready&) {}});
      }
    },
  };
}

}  // namespace sailor::actors
