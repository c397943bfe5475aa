#include "sailor/actors/runtime.hpp"

#include <caf/scoped_actor.hpp>

#include "actor_lifetime.hpp"
#include "sailor/actors/remote_scheduler.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"
#include "sailor/config/log.hpp"

namespace sailor::actors {

runtime_config::runtime_config() {
  sailor::actors::add_message_types(*this);
  // CAF's own log output is not wanted on the terminal of a Sailor process.
  set("logger.console", caf::atom("none"));
}

result<std::unique_ptr<coordinator>> coordinator::start(caf::actor_system& system,
                                                        coordinator_options options) {
  std::unique_ptr<coordinator> self{new coordinator};
  self->bridge_ = std::make_unique<bridge>(system, options.transport);
  auto& sup = options.supervisor;
  if (options.remote_scheduler)
    sup.scheduler = spawn_scheduler_gate(system, *self->bridge_);
  if (!sup.scheduler) {
    if (!options.plan)
      return sailor::error::invalid_input(
        "scheduler", "a coordinator needs a scheduler actor or a planning function");
    sup.scheduler = system.spawn(planner_actor, std::move(options.plan));
    sup.builtin = sup.scheduler;
  } else if (options.plan && !sup.builtin) {
    // A scheduler of the user's: the planning function is the built-in planner beside it.
    sup.builtin = system.spawn(planner_actor, std::move(options.plan));
  }
  self->builtin_ = sup.builtin;
  self->scheduler_ = sup.scheduler;
  auto* links = self->bridge_.get();
  sup.publish = [links](const std::string& name, const caf::actor& a) { links->publish(name, a); };
  rendezvous_limits store_limits;
  store_limits.require_scope = true;  // the supervisor opens each plan's scope
  self->store_ = spawn_rendezvous_server(system, store_limits);
  sup.store = self->store_;
  self->supervisor_ = system.spawn(job_supervisor, sup);
  // The dynamic seam on the supervisor's side: the bridge delivers what it decodes from a
  // peer to the actor published under the name, as a caf::message. Its codec decodes
  // protocol messages only (protocol/codec.hpp), so a peer reaches the node port and
  // status_request at most (scheduler messages are refused on the way, peer_checks.hpp); the
  // timers, the scheduler's requests and the local reports are no wire messages.
  self->bridge_->publish("supervisor", caf::actor_cast<caf::actor>(self->supervisor_));
  self->bridge_->publish("store", self->store_);
  supervisor_actor supervisor = self->supervisor_;
  self->bridge_->on_refused([supervisor](const peer_refused& x) {
    caf::anon_send(supervisor, x);
  });
  auto port = self->bridge_->listen(options.host, options.port);
  if (!port) {
    detail::stop_actor(self->supervisor_);
    return port.error();
  }
  self->port_ = *port;
  log::get("actors")->info("[coordinator] listening on {}:{}", options.host, self->port_);
  return self;
}

coordinator::~coordinator() {
  detail::stop_actor(supervisor_);
  detail::stop_actor(store_);
  detail::stop_actor(scheduler_);
  if (builtin_ != scheduler_)
    detail::stop_actor(builtin_);
  // Give the supervisor's goodbyes (shutdown notices) a moment to leave before the links
  // close: wait for it to be down, bounded.
  if (supervisor_)
    detail::wait_down(supervisor_, std::chrono::seconds{2});
  bridge_->close();
}

result<std::unique_ptr<node>> node::start(caf::actor_system& system, const std::string& host,
                                          std::uint16_t port, node_agent_options options,
                                          comm::transport* transport) {
  std::unique_ptr<node> self{new node};
  self->bridge_ = std::make_unique<bridge>(system, transport);
  auto peer = self->bridge_->connect(host, port);
  if (!peer)
    return peer.error();
  auto* links = self->bridge_.get();
  auto id = *peer;
  // A bridge proxy takes any message and encodes what the codec knows: typed here by what a
  // node sends the supervisor (protocol messages only).
  options.supervisor = caf::actor_cast<supervisor_node_port>(links->remote_actor(id, "supervisor"));
  options.resolve = [links, id](const std::string& name) { return links->remote_actor(id, name); };
  self->rendezvous_ = rendezvous_client::start(
    system, links->remote_actor(id, "store"),
    [links](const std::string& name, const caf::actor& a) { links->publish(name, a); },
    options.inventory.name);
  if (!options.outcome)
    options.outcome = std::make_shared<agent_outcome>();
  self->outcome_ = options.outcome;
  // Publish before the agent sends its join, so that the reply finds it.
  auto agent = system.spawn(node_agent, std::move(options));
  self->bridge_->publish("agent", caf::actor_cast<caf::actor>(agent));
  self->agent_ = agent;
  caf::anon_send(agent, start_atom::value);
  return self;
}

node::~node() {
  detail::stop_actor(agent_);
  if (rendezvous_)
    rendezvous_->close();
  bridge_->close();
  rendezvous_.reset();
}

result<cluster_status> query_status(caf::actor_system& system, const std::string& host,
                                    std::uint16_t port, std::chrono::milliseconds timeout,
                                    comm::transport* transport) {
  bridge links{system, transport};
  auto peer = links.connect(host, port, static_cast<int>(timeout.count()));
  if (!peer)
    return peer.error();
  caf::scoped_actor self{system};
  links.publish("status", caf::actor_cast<caf::actor>(self));
  // A bridge proxy, typed by the one message sent to it.
  auto supervisor = caf::actor_cast<supervisor_actor>(links.remote_actor(*peer, "supervisor"));
  self->monitor(supervisor);
  self->send(supervisor, status_request{});
  result<cluster_status> out =
    sailor::error::disconnected("no answer within " + std::to_string(timeout.count()) +
                                " ms from " + host + ":" + std::to_string(port));
  bool done = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    self->receive(
      [&](const cluster_status& x) {
        out = x;
        done = true;
      },
      [&](const join_refused& x) {
        out = sailor::error::failed("refused: " + x.reason);
        done = true;
      },
      [&](const caf::down_msg&) {
        out = sailor::error::disconnected("the coordinator closed the connection");
        done = true;
      },
      caf::after(left) >> [] {});
  }
  links.close();
  return out;
}

}  // namespace sailor::actors

namespace sailor::actors {

result<std::unique_ptr<comm::transport>> make_transport(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& zone,
                                                        const std::string& token,
                                                        const std::string& host,
                                                        const comm::transport_options::tls_files& tls) {
  comm::transport_options common;
  common.local_name = name;
  common.local_zone = zone;
  common.token = token;
  common.tls = tls;
  if (kind == "ucx") {
    comm::ucx_options options;
    options.common = common;
    options.host = host;
    return comm::make_ucx_transport(options);
  }
  if (kind == "tcp")
    return comm::make_tcp_transport(common);
  return sailor::error::invalid_input("--transport",
                                      "unknown transport '" + kind + "' (expected ucx or tcp)");
}

result<std::shared_ptr<train::checkpoint_keeper>> start_checkpoint_keeper(
  const std::string& kind, const std::string& token, train::checkpoint_keeper_options options,
  const comm::transport_options::tls_files& tls) {
  auto transport = make_transport(kind, keeper_name, "", token, options.host, tls);
  if (!transport)
    return transport.error();
  return train::checkpoint_keeper::start(std::move(*transport), std::move(options));
}

}  // namespace sailor::actors
