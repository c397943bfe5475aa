// The coordinator's scheduler gate (remote_scheduler.hpp): the supervisor's scheduler when
// the scheduler runs in its own process.

#include <map>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "peer_checks.hpp"
#include "sailor/actors/remote_scheduler.hpp"
#include "sailor/config/log.hpp"

namespace sailor::actors {
namespace {

struct gate_state {
  // Not a handle first: CAF builds the state from the actor's own pointer when it can.
  std::string remote_name;
  caf::actor remote;  // the attached scheduler's host, through the bridge; empty: none
  supervisor_port supervisor;
  scheduler_actor builtin;
  // The supervisor's plan requests the remote scheduler has not answered yet.
  std::map<std::int64_t, caf::typed_response_promise<plan_reply>> pending;
  static inline const char* name = "scheduler_gate";
};
using gate = caf::stateful_actor<gate_state>;

bool from_remote(gate* self) {
  auto& st = self->state;
  return st.remote && self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(st.remote);
}

// An event of the supervisor's, passed on to the scheduler when one is attached.
template <class T>
void tell(gate* self, const T& x) {
  if (self->state.remote && !from_remote(self))
    self->send(self->state.remote, x);
}

void on_hello(gate* self, const protocol::scheduler_hello& x) {
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  if (!sender)
    return;
  if (st.remote && st.remote != sender) {
    log::get("actors")->warn("[scheduler gate] refused scheduler '{}': '{}' is attached",
                             detail::printable(x.name), st.remote_name);
    self->send(sender, protocol::scheduler_reply{0, false,
                                                 "a scheduler is already attached ('" +
                                                   st.remote_name + "')"});
    return;
  }
  st.remote = sender;
  st.remote_name = detail::printable(x.name);
  self->monitor(sender);
  log::get("actors")->info("[scheduler gate] scheduler '{}' attached: it plans from now on",
                           st.remote_name);
  self->send(sender, protocol::scheduler_reply{0, true, {}});
}

// The scheduler's process is gone: its open decisions go to the built-in planner at once.
void on_remote_down(gate* self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (!st.remote || msg.source != st.remote.address())
    return;
  log::get("actors")->warn("[scheduler gate] scheduler '{}' is gone ({}); the job runs on its "
                           "last plan, and the built-in planner decides until a scheduler "
                           "attaches again",
                           st.remote_name, self->system().render(msg.reason));
  st.remote = caf::actor{};
  for (auto& [id, promise] : st.pending)
    promise.deliver(caf::make_error(caf::sec::runtime_error,
                                    "the scheduler '" + st.remote_name + "' is gone"));
  st.pending.clear();
}

// A request of the remote scheduler's, asked of the supervisor; the answer goes back by id.
template <class T>
void relay(gate* self, std::int64_t id, T request) {
  auto& st = self->state;
  auto remote = st.remote;
  if (!st.supervisor) {
    self->send(remote, protocol::scheduler_reply{id, false, "the supervisor has not started"});
    return;
  }
  self->request(st.supervisor, std::chrono::seconds{30}, std::move(request))
    .then(
      [self, id, remote](scheduler_answer& a) {
        self->send(remote, protocol::scheduler_reply{id, a.accepted, a.reason});
      },
      [self, id, remote](caf::error& err) {
        self->send(remote, protocol::scheduler_reply{id, false, self->system().render(err)});
      });
}

// The codec refuses a kind this build does not know from the wire; any other is answered too.
void on_request(gate* self, const protocol::scheduler_request& x) {
  using command = protocol::scheduler_command;
  if (auto rule = protocol::placement_of(x.kind)) {
    relay(self, x.request_id, placement_rule{*rule, x.node, x.stage});
    return;
  }
  switch (x.kind) {
    case command::replan_now: relay(self, x.request_id, replan_now{x.reason}); break;
    case command::drain_node: relay(self, x.request_id, drain_node{x.node, x.deadline_ms}); break;
    case command::evict_node: relay(self, x.request_id, evict_node{x.node, x.reason}); break;
    case command::objective_change:
      relay(self, x.request_id, objective_change{x.key, x.value});
      break;
    default:
      self->send(self->state.remote,
                 protocol::scheduler_reply{x.request_id, false,
                                           "scheduler_request: unknown kind " +
                                             std::to_string(static_cast<int>(x.kind))});
  }
}

// The remote scheduler asks the built-in planner for a candidate; the reply goes back with
// the request's id.
void candidate(gate* self, plan_request x) {
  auto& st = self->state;
  auto remote = st.remote;
  auto id = x.request_id;
  if (!st.builtin) {
    self->send(remote, plan_reply::failure(id, "the coordinator has no built-in planner"));
    return;
  }
  self->request(st.builtin, std::chrono::seconds{60}, std::move(x))
    .then([self, remote](plan_reply& r) { self->send(remote, std::move(r)); },
          [self, remote, id](caf::error& err) {
            self->send(remote, plan_reply::failure(id, self->system().render(err)));
          });
}

caf::behavior gate_actor(gate* self) {
  self->set_down_handler([self](caf::down_msg& msg) { on_remote_down(self, msg); });
  auto unheard = [self](const char* what) {
    log::get("actors")->warn("[scheduler gate] dropped a {} from a sender that is not the "
                             "attached scheduler",
                             what);
  };
  return {
    [self](const scheduler_attached& x) {
      self->state.supervisor = x.supervisor;
      self->state.builtin = x.builtin;
    },
    [self](plan_request& x) -> caf::result<plan_reply> {
      auto& st = self->state;
      if (from_remote(self)) {
        candidate(self, std::move(x));
        return caf::delegated<plan_reply>{};
      }
      if (!st.remote)
        return caf::make_error(caf::sec::runtime_error, "no scheduler is attached");
      // The supervisor waits for one plan at a time: earlier requests still open were given
      // up (late); they go, so that a scheduler that never answers holds nothing.
      for (auto& [id, late] : st.pending)
        late.deliver(caf::make_error(caf::sec::request_timeout, "overtaken by a newer request"));
      st.pending.clear();
      auto promise = self->make_response_promise<plan_reply>();
      st.pending[x.request_id] = promise;
      self->send(st.remote, std::move(x));
      return caf::delegated<plan_reply>{};
    },
    [self, unheard](plan_reply& x) {
      if (!from_remote(self))
        return unheard("plan_reply");
      auto i = self->state.pending.find(x.request_id);
      if (i == self->state.pending.end())
        return;  // the supervisor gave up on it (late) or it was never asked
      i->second.deliver(std::move(x));
      self->state.pending.erase(i);
    },
    [self](const protocol::scheduler_hello& x) { on_hello(self, x); },
    [self, unheard](const protocol::scheduler_request& x) {
      if (!from_remote(self))
        return unheard("scheduler_request");
      on_request(self, x);
    },
    [self](const availability_event& x) { tell(self, x); },
    [self](const iteration_telemetry& x) { tell(self, x); },
    [self](const plan_applied& x) { tell(self, x); },
    [self](const plan_refused& x) { tell(self, x); },
    [self](const replan_finished& x) { tell(self, x); },
  };
}

}  // namespace

scheduler_actor spawn_scheduler_gate(caf::actor_system& system, bridge& links) {
  auto g = system.spawn(gate_actor);
  links.publish(protocol::scheduler_gate_actor, g);
  return caf::actor_cast<scheduler_actor>(g);
}

}  // namespace sailor::actors
