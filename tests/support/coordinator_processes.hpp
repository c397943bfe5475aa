#pragma once
// A coordinator process on loopback and its node processes, with an actor system of this
// process that asks the coordinator for its status over the job's transport: the fixture
// that the cluster and hostile-peer tests build on.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/transport.hpp"
#include "temp_file.hpp"

namespace sailor::testing {

struct coordinator_processes {
  coordinator_processes(std::string job_token, std::chrono::milliseconds status_timeout)
    : token(std::move(job_token)), status_timeout(status_timeout) {}

  temp_dir dir;
  // Every process of the job proves this token in the transport handshake.
  std::string token;
  std::string token_file = dir.write("token", token + "\n");
  std::unique_ptr<comm::transport> transport;  // this process's, for the status queries
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  std::unique_ptr<child> coordinator;
  std::vector<std::unique_ptr<child>> nodes;
  std::uint16_t port = 0;  // the coordinator's
  std::chrono::milliseconds status_timeout;

  result<actors::cluster_status> status() {
    return actors::query_status(system, "127.0.0.1", port, status_timeout, transport.get());
  }

  /// Running with `n` nodes, and every role of the plan ready.
  bool all_roles_ready(std::size_t n) {
    auto s = status();
    return s && s->phase == "running" && s->nodes.size() == n && s->roles_total > 0 &&
           s->roles_ready == s->roles_total;
  }

  /// An event of the coordinator's status holds `text`.
  bool has_event(const std::string& text) {
    auto s = status();
    if (!s)
      return false;
    for (auto& e : s->events)
      if (e.find(text) != std::string::npos)
        return true;
    return false;
  }
};

}  // namespace sailor::testing
