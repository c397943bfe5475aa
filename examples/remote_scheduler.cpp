// A scheduler in its own process (docs/scheduler-api.md, "A scheduler in its own process").
// It connects to `sailor coordinator --scheduler remote` like a node does, asks the
// coordinator's built-in planner for a candidate plan and returns it, and prints what the job
// tells it.
//
//   remote_scheduler --join HOST:PORT [--token-file FILE] [--join-timeout S]
//
// A coordinator that is not listening yet is waited for, as nodes do (60 s unless told);
// exit codes: 0 the coordinator closed the connection, 2 bad arguments, 3 refused or no
// coordinator within --join-timeout.
//
// Without options it checks itself: a coordinator with a scheduler gate and two nodes in this
// process, this scheduler connected to it over TCP on loopback; then the scheduler goes, the
// job keeps its plan, and the built-in planner decides the next re-plan.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "sailor/actors/placement.hpp"
#include "sailor/actors/remote_scheduler.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/auth.hpp"
#include "sailor/comm/transport.hpp"
#include "in_process_nodes.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

// What the self-check reads.
struct seen {
  std::atomic<int> attached{0}, applied_by_scheduler{0}, answers{0};
};

struct candidate_state {
  // First: CAF builds the state from the actor's pointer when its first member takes one.
  std::shared_ptr<seen> counts;
  supervisor_port supervisor;
  scheduler_actor builtin;
  static inline const char* name = "candidate_scheduler";
};
using candidate_pointer = scheduler_actor::stateful_pointer<candidate_state>;

// A request the supervisor refuses (no such node): shows the answer path, changes nothing.
void ask_something(candidate_pointer self) {
  auto counts = self->state.counts;
  self->request(self->state.supervisor, 10s, evict_node{"no-such-node", "a check"})
    .then(
      [counts](const scheduler_answer& a) {
        ++counts->answers;
        std::printf("scheduler: evict no-such-node: %s: %s\n",
                    a.accepted ? "accepted" : "refused", a.reason.c_str());
      },
      [](caf::error& e) {
        std::printf("scheduler: evict no-such-node: no answer: %s\n", caf::to_string(e).c_str());
      });
}

scheduler_actor::behavior_type candidate_scheduler(candidate_pointer self,
                                                   std::shared_ptr<seen> counts) {
  self->state.counts = std::move(counts);
  return {
    [self](const plan_request& r) -> caf::typed_response_promise<plan_reply> {
      auto promise = self->make_response_promise<plan_reply>();
      self->request(self->state.builtin, 30s, r)
        .then(
          [promise](plan_reply& candidate) mutable {
            std::printf("scheduler: candidate for request %lld: %s\n",
                        static_cast<long long>(candidate.request_id),
                        candidate.ok ? describe_plan(candidate.plan).c_str()
                                     : candidate.error.c_str());
            promise.deliver(std::move(candidate));
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
      return promise;
    },
    [self](const scheduler_attached& x) {
      self->state.supervisor = x.supervisor;
      self->state.builtin = x.builtin;
      ++self->state.counts->attached;
      std::printf("scheduler: attached\n");
    },
    [self](const plan_applied& x) {
      std::printf("scheduler: plan v%lld applied by the %s\n",
                  static_cast<long long>(x.plan_version), x.by.c_str());
      if (x.by == "scheduler" && self->state.counts->applied_by_scheduler++ == 0)
        ask_something(self);
    },
    [](const iteration_telemetry& t) {
      std::printf("scheduler: telemetry v%lld iteration %lld node %s stage %d: %.3f s, loss "
                  "%.4f\n",
                  static_cast<long long>(t.plan_version), static_cast<long long>(t.iteration),
                  t.node.c_str(), t.stage, t.measured_s, t.loss);
    },
    [](const availability_event& x) {
      std::printf("scheduler: node %s %s\n", x.node.name.c_str(), to_string(x.kind));
    },
    [](const plan_refused& x) { std::printf("scheduler: plan refused: %s\n", x.reason.c_str()); },
    [](const replan_finished& x) {
      std::printf("scheduler: re-plan to v%lld took %.3f s\n",
                  static_cast<long long>(x.plan_version), x.recovery_s);
    },
  };
}

int fail(const char* why) {
  std::fprintf(stderr, "remote_scheduler: check failed: %s\n", why);
  return 1;
}

// Everything in this process; the scheduler still talks to the coordinator over TCP.
int self_check() {
  runtime_config cfg;
  caf::actor_system system{cfg};
  auto options = examples::tiny_model_coordinator({"local-a"}, 2);
  options.supervisor.heartbeat_interval = 100ms;
  options.supervisor.heartbeat_timeout = 600ms;
  options.remote_scheduler = true;
  options.plan = [](const plan_request& r) { return even_plan(r.nodes, r.model_layers, 8); };
  auto coord = coordinator::start(system, options);
  if (!coord)
    return fail(coord.error().message.c_str());
  auto counts = std::make_shared<seen>();
  auto remote = remote_scheduler::connect(system, "127.0.0.1", (*coord)->port(),
                                          system.spawn(candidate_scheduler, counts));
  if (!remote)
    return fail(remote.error().message.c_str());
  auto nodes = examples::start_nodes(system, (*coord)->port(),
                                     {{"n1", "local-a"}, {"n2", "local-a"}});
  if (!nodes)
    return fail(nodes.error().message.c_str());
  auto running = [](const cluster_status& s) { return s.phase == "running"; };
  auto first = examples::wait_for(system, (*coord)->port(), running);
  if (!first || counts->applied_by_scheduler == 0)
    return fail("no plan of the remote scheduler's ran within 20 s");
  for (int i = 0; i < 200 && counts->answers == 0; ++i)
    std::this_thread::sleep_for(50ms);  // sleep override: the answer crosses two bridges
  if (counts->answers == 0)
    return fail("the supervisor's answer to a request did not come back");
  std::printf("check: plan v%lld of the remote scheduler runs: %s\n",
              static_cast<long long>(first->plan_version), first->plan_summary.c_str());
  (*remote).reset();  // the scheduler's process goes
  nodes->pop_back();  // and then a node: the built-in planner re-plans
  auto after = examples::wait_for(system, (*coord)->port(), [&](const cluster_status& s) {
    return s.phase == "running" && s.plan_version > first->plan_version;
  });
  if (!after)
    return fail("no re-plan by the built-in planner after the scheduler went");
  bool builtin = false;
  for (auto& e : after->events)
    builtin = builtin || e.find("the built-in planner decides") != std::string::npos;
  if (!builtin)
    return fail("the status does not say the built-in planner decided");
  std::printf("check: after the scheduler went, plan v%lld by the built-in planner: %s\n",
              static_cast<long long>(after->plan_version), after->plan_summary.c_str());
  return 0;
}

// Connects as a node does: a coordinator that is not up yet is tried again with backoff for up
// to `timeout` (said once); a refusal (another job's token, a scheduler already attached) is
// final.
sailor::result<std::unique_ptr<remote_scheduler>> connect_with_retry(
  caf::actor_system& system, const std::string& where, const sailor::comm::address& address,
  sailor::comm::transport* transport, const std::shared_ptr<seen>& counts, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = std::chrono::milliseconds{200};
  for (bool told = false;; told = true) {
    auto remote = remote_scheduler::connect(system, address.host, address.port,
                                            system.spawn(candidate_scheduler, counts), transport);
    if (remote || remote.error().kind == sailor::error_kind::invalid_input)
      return remote;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return sailor::error::disconnected("none at " + where + " within --join-timeout " +
                                         std::to_string(timeout.count()) + " s: " + remote.error().message);
    if (!told)
      std::printf("scheduler: no coordinator at %s yet (%s); retrying for up to %lld s\n", where.c_str(),
                  remote.error().message.c_str(), static_cast<long long>(timeout.count()));
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(backoff, deadline - now));  // sleep override: the retry's backoff
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
}

int join(const std::string& where, const std::string& token_file, std::chrono::seconds join_timeout) {
  auto address = sailor::comm::address::parse(where);
  if (!address) {
    std::fprintf(stderr, "remote_scheduler: --join: %s\n", address.error().message.c_str());
    return 2;
  }
  auto token = sailor::comm::load_job_token(token_file);
  if (!token) {
    std::fprintf(stderr, "remote_scheduler: --token-file: %s\n", token.error().message.c_str());
    return 2;
  }
  auto transport = make_transport("tcp", sailor::protocol::scheduler_peer_name, "", *token);
  if (!transport) {
    std::fprintf(stderr, "remote_scheduler: %s\n", transport.error().message.c_str());
    return 1;
  }
  runtime_config cfg;
  caf::actor_system system{cfg};
  auto counts = std::make_shared<seen>();
  auto remote = connect_with_retry(system, where, *address, transport->get(), counts, join_timeout);
  if (!remote) {
    const bool refused = remote.error().kind == sailor::error_kind::invalid_input;
    std::fprintf(stderr, "remote_scheduler: %s%s\n", refused ? "" : "no coordinator: ",
                 remote.error().message.c_str());
    return 3;  // unavailable: refused, or no coordinator within --join-timeout
  }
  while (!(*remote)->wait_closed(1h)) {
  }
  std::printf("scheduler: the coordinator closed the connection\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string where, token_file, timeout_text = "60";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--join" || arg == "--token-file" || arg == "--join-timeout") && i + 1 < argc) {
      (arg == "--join" ? where : arg == "--token-file" ? token_file : timeout_text) = argv[++i];
    } else {
      std::printf("usage: remote_scheduler [--join HOST:PORT [--token-file FILE] [--join-timeout S]]: a "
                  "scheduler in its own process for `sailor coordinator --scheduler remote`, which "
                  "waits up to S seconds (default 60) for a coordinator not up yet; without options, "
                  "a check in this process\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  char* end = nullptr;
  const long timeout_s = std::strtol(timeout_text.c_str(), &end, 10);
  if (timeout_text.empty() || *end || timeout_s <= 0) {
    std::fprintf(stderr, "remote_scheduler: --join-timeout: expected a positive number of seconds, got '%s'\n",
                 timeout_text.c_str());
    return 2;
  }
  if (!where.empty())
    return join(where, token_file, std::chrono::seconds{timeout_s});
  if (!token_file.empty()) {
    std::fprintf(stderr, "remote_scheduler: --token-file needs --join\n");
    return 2;
  }
  return self_check();
}
