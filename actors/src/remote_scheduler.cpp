// A scheduler in its own process (remote_scheduler.hpp): the host actor that stands, for the
// user's scheduler, for the supervisor and the built-in planner of the coordinator, and the
// connection that carries it.

#include "sailor/actors/remote_scheduler.hpp"

#include <future>
#include <map>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actor_lifetime.hpp"
#include "sailor/config/log.hpp"

namespace sailor::actors {
namespace {

struct host_state {
  // Not a handle first: CAF builds the state from the actor's own pointer when it can.
  std::shared_ptr<std::promise<std::string>> hello;  // "" accepted, else why not
  scheduler_actor user;
  caf::actor gate;  // the coordinator's scheduler gate, through the bridge
  bool hello_done = false;
  std::int64_t next_id = 1;
  std::map<std::int64_t, caf::typed_response_promise<scheduler_answer>> answers;
  // Candidate plan requests to the built-in planner: the wire id, the promise and the
  // request id the user gave.
  std::map<std::int64_t, std::pair<caf::typed_response_promise<plan_reply>, std::int64_t>>
    candidates;
  static inline const char* name = "remote_scheduler";
};
using host = caf::stateful_actor<host_state>;

void say_hello(host* self, std::string outcome) {
  auto& st = self->state;
  if (st.hello_done)
    return;
  st.hello_done = true;
  st.hello->set_value(std::move(outcome));
}

bool from_gate(host* self) {
  return self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(self->state.gate);
}

// A request of the user's scheduler, sent to the gate; answered when its reply comes back.
caf::result<scheduler_answer> ask(host* self, protocol::scheduler_request x) {
  auto& st = self->state;
  x.request_id = st.next_id++;
  st.answers[x.request_id] = self->make_response_promise<scheduler_answer>();
  self->send(st.gate, std::move(x));
  return caf::delegated<scheduler_answer>{};
}

// The supervisor's plan request, answered by the user's scheduler; the reply goes back.
void plan_for_supervisor(host* self, plan_request x) {
  auto gate = self->state.gate;
  auto id = x.request_id;
  self->request(self->state.user, caf::infinite, std::move(x))
    .then([self, gate](plan_reply& r) { self->send(gate, std::move(r)); },
          [self, gate, id](caf::error& err) {
            self->send(gate, plan_reply::failure(id, "the scheduler failed: " +
                                                       self->system().render(err)));
          });
}

void on_reply(host* self, const protocol::scheduler_reply& x) {
  auto& st = self->state;
  if (x.request_id == 0) {
    say_hello(self, x.accepted ? std::string{} : "refused: " + x.reason);
    if (x.accepted)
      self->send(st.user, scheduler_attached{caf::actor_cast<supervisor_port>(self),
                                             caf::actor_cast<scheduler_actor>(self)});
    return;
  }
  auto i = st.answers.find(x.request_id);
  if (i == st.answers.end())
    return;
  i->second.deliver(scheduler_answer{x.accepted, x.reason});
  st.answers.erase(i);
}

void on_candidate(host* self, plan_reply x) {
  auto& st = self->state;
  auto i = st.candidates.find(x.request_id);
  if (i == st.candidates.end())
    return;
  x.request_id = i->second.second;
  i->second.first.deliver(std::move(x));
  st.candidates.erase(i);
}

void on_down(host* self, const caf::down_msg& msg) {
  auto& st = self->state;
  std::string why = msg.source == st.gate.address() ? "the coordinator closed the connection"
                                                    : "the scheduler ended";
  say_hello(self, why);
  log::get("actors")->info("[remote scheduler] {}", why);
  for (auto& [id, p] : st.answers)
    p.deliver(caf::make_error(caf::sec::runtime_error, why));
  for (auto& [id, p] : st.candidates)
    p.first.deliver(caf::make_error(caf::sec::runtime_error, why));
  self->quit(msg.reason);
}

// Events from the gate, passed to the user's scheduler.
template <class T>
void tell(host* self, const T& x) {
  if (from_gate(self))
    self->send(self->state.user, x);
}

caf::behavior host_actor(host* self, scheduler_actor user, caf::actor gate,
                         std::shared_ptr<std::promise<std::string>> hello) {
  self->state.user = user;
  self->state.gate = gate;
  self->state.hello = std::move(hello);
  self->monitor(gate);
  self->monitor(user);
  self->set_down_handler([self](caf::down_msg& msg) { on_down(self, msg); });
  return {
    [self](start_atom) {
      self->send(self->state.gate, protocol::scheduler_hello{"remote scheduler"});
    },
    [self](plan_request& x) -> caf::result<plan_reply> {
      auto& st = self->state;
      if (from_gate(self)) {
        plan_for_supervisor(self, std::move(x));
        return caf::delegated<plan_reply>{};
      }
      // From the user: a candidate of the coordinator's built-in planner.
      auto wire_id = st.next_id++;
      st.candidates[wire_id] = {self->make_response_promise<plan_reply>(), x.request_id};
      x.request_id = wire_id;
      self->send(st.gate, std::move(x));
      return caf::delegated<plan_reply>{};
    },
    [self](plan_reply& x) {
      if (from_gate(self))
        on_candidate(self, std::move(x));
    },
    [self](const protocol::scheduler_reply& x) {
      if (from_gate(self))
        on_reply(self, x);
    },
    [self](const join_refused& x) { say_hello(self, "refused: " + x.reason); },
    [self](const availability_event& x) { tell(self, x); },
    [self](const iteration_telemetry& x) { tell(self, x); },
    [self](const plan_applied& x) { tell(self, x); },
    [self](const plan_refused& x) { tell(self, x); },
    [self](const replan_finished& x) { tell(self, x); },
    [self](const replan_now& x) {
      return ask(self, {0, protocol::scheduler_command::replan_now, {}, x.reason, 0, -1, {}, {}});
    },
    [self](const drain_node& x) {
      return ask(self, {0, protocol::scheduler_command::drain_node, x.node, {}, x.deadline_ms, -1, {}, {}});
    },
    [self](const evict_node& x) {
      return ask(self, {0, protocol::scheduler_command::evict_node, x.node, x.reason, 0, -1, {}, {}});
    },
    [self](const placement_rule& x) -> caf::result<scheduler_answer> {
      if (auto command = protocol::command_for(x.kind))
        return ask(self, {0, *command, x.node, {}, 0, x.stage, {}, {}});
      return scheduler_answer{false, "placement_rule: kind " +
                                       std::to_string(static_cast<int>(x.kind)) +
                                       ", expected pin, forbid or clear"};
    },
    [self](const objective_change& x) {
      return ask(self, {0, protocol::scheduler_command::objective_change, {}, {}, 0, -1, x.key, x.value});
    },
  };
}

}  // namespace

result<std::unique_ptr<remote_scheduler>> remote_scheduler::connect(
  caf::actor_system& system, const std::string& host, std::uint16_t port,
  scheduler_actor scheduler, comm::transport* transport, std::chrono::milliseconds timeout) {
  std::unique_ptr<remote_scheduler> self{new remote_scheduler};
  self->bridge_ = std::make_unique<bridge>(system, transport);
  auto peer = self->bridge_->connect(host, port, static_cast<int>(timeout.count()));
  if (!peer)
    return peer.error();
  auto gate = self->bridge_->remote_actor(*peer, protocol::scheduler_gate_actor);
  auto hello = std::make_shared<std::promise<std::string>>();
  auto outcome = hello->get_future();
  self->scheduler_ = scheduler;
  self->host_ = system.spawn(host_actor, std::move(scheduler), gate, hello);
  // "agent": where a refusal at the door is told. Published last under the name its
  // messages are sent from.
  self->bridge_->publish("agent", self->host_);
  self->bridge_->publish(protocol::scheduler_host_actor, self->host_);
  caf::anon_send(self->host_, start_atom::value);
  const auto where = host + ":" + std::to_string(port);
  if (outcome.wait_for(timeout) != std::future_status::ready)
    return sailor::error::disconnected("no answer from the scheduler gate of the coordinator at " +
                                       where + " within " + std::to_string(timeout.count()) +
                                       " ms (does it run with --scheduler remote?)");
  if (auto why = outcome.get(); !why.empty())
    return sailor::error::invalid_input("--join", "refused by the coordinator at " + where + ": " + why);
  log::get("actors")->info("[remote scheduler] attached to the coordinator at {}", where);
  return self;
}

remote_scheduler::~remote_scheduler() {
  detail::stop_actor(host_);
  detail::stop_actor(scheduler_);
  bridge_->close();
}

bool remote_scheduler::wait_closed(std::chrono::milliseconds limit) {
  return detail::wait_down(host_, limit);
}

}  // namespace sailor::actors
