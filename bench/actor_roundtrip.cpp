// CAF message round trips: inside one actor system, and across processes through the bridge
// (Cap'n Proto/CAF frames over comm's UCX and TCP transports, and the bridge's own sockets).
//
//   build/bench/actor_roundtrip [--round-trips N]
//
// A child process (forked before any thread exists) runs an echo actor behind a bridge; the
// parent sends a status request and waits for the reply, N times per transport, and prints
// the median and 99th percentile round trip and the ratio to the in-process one.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/scoped_actor.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"

using namespace sailor;
using namespace sailor::actors;
using clock_type = std::chrono::steady_clock;

namespace {

caf::behavior echo(caf::event_based_actor* self) {
  return {
    [self](const status_request& x) {
      cluster_status reply;
      reply.plan_version = x.unused + 1;
      self->send(caf::actor_cast<caf::actor>(self->current_sender()), reply);
    },
  };
}

std::unique_ptr<comm::transport> make_comm(const std::string& kind, const std::string& name) {
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
  return nullptr;  // the bridge's own framed sockets
}

struct figures {
  double median_us = 0;
  double p99_us = 0;
};

// Sends `n` requests to `target` one after the other and times each reply.
figures time_round_trips(caf::scoped_actor& self, const caf::actor& target, int n) {
  std::vector<double> us;
  us.reserve(n);
  for (int k = 0; k < n + n / 10; ++k) {  // the first tenth warms up and is not counted
    auto start = clock_type::now();
    self->send(target, status_request{k});
    bool got = false;
    self->receive([&](const cluster_status&) { got = true; }, caf::after(std::chrono::seconds(5)) >> [] {});
    if (!got) {
      std::fprintf(stderr, "actor_roundtrip: no reply within 5 s\n");
      std::exit(1);
    }
    if (k >= n / 10) us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// The child: an echo actor behind a bridge on an ephemeral port, written to `port_fd`.
[[noreturn]] void serve(const std::string& kind, int port_fd) {
  runtime_config cfg;
  caf::actor_system system{cfg};
  auto transport = make_comm(kind, "echo-server");
  bridge server{system, transport.get()};
  server.publish("echo", system.spawn(echo));
  auto port = server.listen("127.0.0.1", 0);
  std::uint16_t value = port ? *port : 0;
  (void)!::write(port_fd, &value, sizeof value);
  ::close(port_fd);
  ::pause();  // until the parent kills it
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CAF round trips in one actor system and across processes through the bridge"};
  int n = 2000;
  app.add_option("--round-trips", n, "Round trips per row");
  CLI11_PARSE(app, argc, argv);
  setenv("UCX_NET_DEVICES", "lo", 0);
  setenv("UCX_TLS", "tcp,sm,self", 0);

  // Fork the servers first, while this process has no threads.
  const std::vector<std::string> kinds = {"ucx", "tcp", "socket"};
  std::vector<pid_t> children;
  std::vector<std::uint16_t> ports;
  for (const auto& kind : kinds) {
    int fds[2];
    if (::pipe(fds) != 0) return 1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      serve(kind, fds[1]);
    }
    ::close(fds[1]);
    std::uint16_t port = 0;
    if (::read(fds[0], &port, sizeof port) != sizeof port) port = 0;
    ::close(fds[0]);
    children.push_back(pid);
    ports.push_back(port);
  }

  runtime_config cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor self{system};
  auto local = time_round_trips(self, system.spawn(echo), n);
  std::printf("CAF round trip of a small message, %d round trips per row\n", n);
  std::printf("%-34s %12s %12s %10s\n", "path", "median us", "p99 us", "x local");
  std::printf("%-34s %12.1f %12.1f %10.1f\n", "same actor system", local.median_us, local.p99_us, 1.0);
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (ports[i] == 0) {
      std::printf("%-34s %12s\n", ("other process, bridge over " + kinds[i]).c_str(), "failed to start");
      continue;
    }
    auto transport = make_comm(kinds[i], "echo-client");
    bridge client{system, transport.get()};
    auto peer = client.connect("127.0.0.1", ports[i]);
    if (!peer) {
      std::printf("%-34s %s\n", ("other process, bridge over " + kinds[i]).c_str(), peer.error().message.c_str());
      continue;
    }
    client.publish("bench", caf::actor_cast<caf::actor>(self));
    auto f = time_round_trips(self, client.remote_actor(*peer, "echo"), n);
    std::printf("%-34s %12.1f %12.1f %10.1f\n", ("other process, bridge over " + kinds[i]).c_str(), f.median_us,
                f.p99_us, f.median_us / local.median_us);
    client.close();
  }
  std::fflush(stdout);
  for (pid_t pid : children) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return 0;
}
