#pragma once
// CAF message round trips, shared by bench/actor_roundtrip and bench/transport: inside one
// actor system, and across processes through the bridge (Cap'n Proto envelopes over comm's
// UCX and TCP transports).
//
// Call start_echo_servers() first in main(), while the process has no threads: it forks one
// child per transport, each running an echo actor behind a bridge. print_actor_round_trips()
// then sends a status request to each and waits for the reply, N times per transport, and
// prints the median and 99th percentile round trip and the ratio to the in-process one.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"

namespace sailor::bench {

inline caf::behavior echo(caf::event_based_actor* self) {
  return {
    [self](const actors::status_request& x) {
      actors::cluster_status reply;
      reply.plan_version = x.unused + 1;
      self->send(caf::actor_cast<caf::actor>(self->current_sender()), reply);
    },
  };
}

/// A comm transport for the bridge ("ucx" or "tcp"); null when it cannot be made.
inline std::unique_ptr<comm::transport> make_bridge_transport(const std::string& kind,
                                                              const std::string& name) {
  comm::transport_options common;
  common.local_name = name;
  if (kind == "ucx") {
    comm::ucx_options options;
    options.common = common;
    options.ucx_config["NET_DEVICES"] = "lo";
    options.ucx_config["TLS"] = "tcp,sm,self";
    auto t = comm::make_ucx_transport(options);
    return t ? std::move(*t) : nullptr;
  }
  if (kind == "tcp") {
    auto t = comm::make_tcp_transport(common);
    return t ? std::move(*t) : nullptr;
  }
  return nullptr;
}

struct round_trip_figures {
  double median_us = 0;
  double p99_us = 0;
};

/// Sends `n` requests to `target` one after the other and times each reply.
inline round_trip_figures time_round_trips(caf::scoped_actor& self, const caf::actor& target,
                                           int n) {
  using clock_type = std::chrono::steady_clock;
  std::vector<double> us;
  us.reserve(n);
  for (int k = 0; k < n + n / 10; ++k) {  // the first tenth warms up and is not counted
    auto start = clock_type::now();
    self->send(target, actors::status_request{k});
    bool got = false;
    self->receive([&](const actors::cluster_status&) { got = true; },
                  caf::after(std::chrono::seconds(5)) >> [] {});
    if (!got) {
      std::fprintf(stderr, "actor round trip: no reply within 5 s\n");
      std::exit(1);
    }
    if (k >= n / 10)
      us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

/// The children serving an echo actor, one per transport kind.
struct echo_servers {
  std::vector<std::string> kinds;
  std::vector<pid_t> pids;
  std::vector<std::uint16_t> ports;  ///< 0: the child did not start

  echo_servers() = default;
  echo_servers(const echo_servers&) = delete;
  echo_servers& operator=(const echo_servers&) = delete;
  ~echo_servers() {
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// The child: an echo actor behind a bridge on an ephemeral port, written to `port_fd`.
[[noreturn]] inline void serve_echo(const std::string& kind, int port_fd) {
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  auto transport = make_bridge_transport(kind, "echo-server");
  actors::bridge server{system, transport.get()};
  server.publish("echo", system.spawn(echo));
  auto port = server.listen("127.0.0.1", 0);
  std::uint16_t value = port ? *port : 0;
  (void)!::write(port_fd, &value, sizeof value);
  ::close(port_fd);
  ::pause();  // until the parent kills it
  std::_Exit(0);
}

/// Forks the echo servers. Call it before the process starts any thread.
inline std::unique_ptr<echo_servers> start_echo_servers(
  std::vector<std::string> kinds = {"ucx", "tcp"}) {
  auto out = std::make_unique<echo_servers>();
  out->kinds = std::move(kinds);
  for (const auto& kind : out->kinds) {
    int fds[2];
    std::uint16_t port = 0;
    pid_t pid = -1;
    if (::pipe(fds) == 0) {
      pid = ::fork();
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
        ::close(fds[0]);
        serve_echo(kind, fds[1]);
      }
      ::close(fds[1]);
      if (pid < 0 || ::read(fds[0], &port, sizeof port) != sizeof port)
        port = 0;
      ::close(fds[0]);
    }
    if (pid > 0)
      out->pids.push_back(pid);
    out->ports.push_back(port);
  }
  return out;
}

/// Prints the round trips: in one actor system, then to each server through the bridge.
inline void print_actor_round_trips(const echo_servers& servers, int n) {
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor self{system};
  auto local = time_round_trips(self, system.spawn(echo), n);
  std::printf("CAF round trip of a small message, %d round trips per row\n", n);
  std::printf("%-34s %12s %12s %10s\n", "path", "median us", "p99 us", "x local");
  std::printf("%-34s %12.1f %12.1f %10.1f\n", "same actor system", local.median_us,
              local.p99_us, 1.0);
  for (std::size_t i = 0; i < servers.kinds.size(); ++i) {
    auto label = "other process, bridge over " + servers.kinds[i];
    if (servers.ports[i] == 0) {
      std::printf("%-34s %12s\n", label.c_str(), "failed to start");
      continue;
    }
    auto transport = make_bridge_transport(servers.kinds[i], "echo-client");
    actors::bridge client{system, transport.get()};
    auto peer = client.connect("127.0.0.1", servers.ports[i]);
    if (!peer) {
      std::printf("%-34s %s\n", label.c_str(), peer.error().message.c_str());
      continue;
    }
    client.publish("bench", caf::actor_cast<caf::actor>(self));
    auto f = time_round_trips(self, client.remote_actor(*peer, "echo"), n);
    std::printf("%-34s %12.1f %12.1f %10.1f\n", label.c_str(), f.median_us, f.p99_us,
                f.median_us / local.median_us);
    client.close();
  }
  std::fflush(stdout);
}

}  // namespace sailor::bench
