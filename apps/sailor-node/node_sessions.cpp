// sailor-node's sessions with its coordinator (node_sessions.hpp).
#include "node_sessions.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <caf/scoped_actor.hpp>
#include <fmt/format.h>

#include "node_host.hpp"
#include "node_outcome.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"
#include "sailor/config/log.hpp"
#include "sailor/protocol/limits.hpp"
#ifdef SAILOR_WITH_TRAIN
#include "sailor/actors/node_training.hpp"
#endif

namespace sailor::node {

// Each rank's data-plane transport: UCX or comm's TCP (--data-transport, else --transport).
// UCX is limited to the interface of the advertised address unless UCX_NET_DEVICES says.
comm::transport_maker data_transport_maker(const node_args& args, const std::string& advertise) {
  std::string kind = args.data_transport;
  if (kind.empty()) kind = args.transport == "ucx" ? "ucx" : "tcp";
  return [kind, advertise](const comm::transport_options& o) -> result<std::unique_ptr<comm::transport>> {
    if (kind == "ucx") {
      comm::ucx_options u;
      u.common = o;
      u.host = advertise;
      return comm::make_ucx_transport(u);
    }
    return comm::make_tcp_transport(o);
  };
}

namespace {

// Joins the coordinator, retrying with backoff while it is not up, until `deadline`.
// `window` names the option that bounds the wait, and its seconds.
result<std::unique_ptr<actors::node>> join_with_retry(
  caf::actor_system& system, const session_context& ctx, actors::node_agent_options options,
  std::pair<const char*, double> window, stop_watch& stop) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds{static_cast<std::int64_t>(window.second * 1000)};
  auto backoff = std::chrono::milliseconds{200};
  bool told = false;
  for (;;) {
    auto node = actors::node::start(system, ctx.coordinator.host, ctx.coordinator.port, options,
                                    ctx.transport);
    if (node || stop.stopped())
      return node;
    // Refused at the handshake (another job token, protocol version or TLS authority): every
    // later try would be refused the same way.
    if (node.error().kind == error_kind::invalid_input)
      return node;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return sailor::error{error_kind::disconnected,
                           "no coordinator at " + ctx.args.join + " within " + window.first +
                             " " + fmt::format("{:g}", window.second) +
                             " s: " + node.error().message,
                           "", 0, "--join"};
    if (!told)
      log::get("actors")->info("[node {}] no coordinator at {} yet ({}); retrying for up to {} s",
                               options.inventory.name, ctx.args.join, node.error().message,
                               left.count() / 1000);
    told = true;
    if (!stop.wait(std::min(backoff, left)))
      return node;
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
}

#ifdef SAILOR_WITH_TRAIN
// What a join offers: the checkpoint shards on disk and, after a session ended (its ranks
// stopped), the state they keep in memory, so that a coordinator restarted meanwhile resumes
// from it (within the protocol's bound on shards).
std::vector<std::string> offered_state(const session_context& ctx) {
  auto out = held_shards(ctx.state_dir);
  if (ctx.memory)
    for (auto& path : ctx.memory->own_paths())
      if (out.size() < protocol::wire_bounds::shards_per_node &&
          path.size() <= protocol::wire_bounds::shard_path_bytes)
        out.push_back(std::move(path));
  return out;
}
#endif

}  // namespace

// Sessions with the coordinator until the node is told to stop, is refused, or cannot reach
// the coordinator within --join-timeout: a dropped connection (the coordinator restarted)
// is followed by a new join, with the checkpoint shards the node holds by then.
int run_sessions(caf::actor_system& system, session_context& ctx, stop_watch& stop) {
  bool lost_coordinator = false;  // its connection dropped: it is waited for --coordinator-grace
  std::int64_t last_plan = 0;     // the newest plan version its ranks were given, told at a join
  for (;;) {
    auto options = ctx.options;
    // An outcome of this session's own: the copy would share the last session's.
    options.outcome = std::make_shared<actors::agent_outcome>();
#ifdef SAILOR_WITH_TRAIN
    options.inventory.checkpoints = offered_state(ctx);
    options.last_plan_version = last_plan;
    // Real training: each stage role becomes a rank of the executor on its own thread.
    train::node_training_options training;
    training.node_name = options.inventory.name;
    training.advertise = ctx.advertise;
    training.state_dir = ctx.state_dir;
    training.transport = ctx.data;
    training.make_data_transport = data_transport_maker(ctx.args, ctx.advertise);
    training.slowdown = ctx.slowdown;
    training.link_changes = ctx.links;
    training.memory = ctx.memory;
    training.access = ctx.access;
    training.threads_per_rank = ctx.args.threads;
    auto trainer = std::make_shared<train::node_trainer>(std::move(training));
    options.hook = [trainer](const actors::stage_role& role, actors::stage_ready_fn ready) {
      return trainer->on_role(role, std::move(ready));
    };
    options.on_training_job = [trainer](const actors::training_job& job) { trainer->on_job(job); };
    options.on_checkpoint_kept = [trainer](const actors::checkpoint_kept& kept) {
      trainer->on_checkpoint_kept(kept);
    };
    options.on_leaving = [trainer] { trainer->leaving(); };
#endif
    const auto window = lost_coordinator ? std::pair{"--coordinator-grace", ctx.args.coordinator_grace_s}
                                         : std::pair{"--join-timeout", ctx.args.join_timeout_s};
    auto node = join_with_retry(system, ctx, options, window, stop);
    if (!node) {
      const bool refused = node.error().kind == error_kind::invalid_input;
      if (lost_coordinator && !refused && !stop.stopped()) {
        std::fprintf(stderr, "sailor-node: the coordinator did not come back: %s; this node's "
                             "state folder %s is kept (%zu checkpoint shards)\n",
                     node.error().message.c_str(), ctx.state_dir.c_str(),
                     options.inventory.checkpoints.size());
        return 1;  // the coordinator lost
      }
      std::fprintf(stderr, "sailor-node: %s%s\n", refused ? "refused by the coordinator: " : "",
                   node.error().message.c_str());
      return stop.stopped() && !refused ? 0 : 3;  // unavailable: no coordinator, or refused
    }
    const actors::node_agent_actor agent = (*node)->agent();
#ifdef SAILOR_WITH_TRAIN
    trainer->set_agent(caf::actor_cast<caf::actor>(agent), (*node)->rendezvous());
#endif
    stop.set_agent(agent);
    {
      caf::scoped_actor self{system};
      self->monitor(agent);
      self->receive([](const caf::down_msg&) {});
    }
    stop.set_agent({});
    auto outcome = (*node)->outcome();
    node->reset();
    using kind = actors::agent_outcome::kind;
    // A node declared lost (it was stalled, or cut off) is alive: it joins as a new member.
    bool again = (outcome.how == kind::coordinator_lost || outcome.how == kind::declared_lost) &&
                 !stop.stopped();
#ifdef SAILOR_WITH_TRAIN
    // Its ranks stop (at their next iteration, or when a peer wait times out) before the next
    // join: what their writers still write and prune would change the shards it offers. A
    // rank that completed the job's last iteration finishes its last checkpoint first.
    trainer->stop();
    last_plan = std::max(last_plan, trainer->plan_version());
    // The coordinator went away as the job ended (its notice did not reach this node): the
    // job's last iteration is done here, there is nothing to wait for.
    if (again && outcome.how == kind::coordinator_lost && trainer->finished_job()) {
      log::get("actors")->info("[node {}] lost the coordinator after its ranks completed the job's "
                               "last iteration: the job finished", options.inventory.name);
      return 0;
    }
#endif
    if (again) {
      lost_coordinator = outcome.how == kind::coordinator_lost;
      log::get("actors")->warn("[node {}] {} ({}); joining again for up to {} s", options.inventory.name,
                               lost_coordinator ? "lost the coordinator" : "declared lost by the coordinator",
                               outcome.reason,
                               lost_coordinator ? ctx.args.coordinator_grace_s : ctx.args.join_timeout_s);
      continue;
    }
    return exit_code_of(outcome);
  }
}

}  // namespace sailor::node
