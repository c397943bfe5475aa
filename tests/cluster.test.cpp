// A real coordinator process and sailor-node processes on loopback, in two emulated zones:
// roles are assigned, a killed node is reported within the heartbeat timeout, a stalled one
// for missed heartbeats, and bad peers are refused while the others are served.
#include <doctest/doctest.h>

#include <algorithm>

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator_processes.hpp"
#include "local_job.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/actors/wire.hpp"
#include "sailor/comm/ucx.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cluster {


using namespace std::chrono;
using namespace sailor::testing;

namespace {

const std::string configs = configs_dir();

constexpr int heartbeat_ms = 100;
constexpr int heartbeat_timeout_ms = 800;

struct cluster_fixture : coordinator_processes {
  cluster_fixture() : coordinator_processes("cluster-test-token-5f1c", 2s) {}

  std::string transport_kind = "ucx";

  // Everything (coordinator, nodes, status queries) over `kind`: ucx or tcp.
  void use_transport(const std::string& kind) {
    transport_kind = kind;
    auto t = sailor::actors::make_transport(kind, "test", "", token);
    REQUIRE(t.ok());
    transport = std::move(*t);
  }

  std::string cluster_file = configs + "/clusters/local-2-zones.yaml";
  std::string model_file = configs + "/models/tiny.yaml";
  std::string job_file = configs + "/jobs/tiny.yaml";

  void start_coordinator(int quorum, std::vector<std::string> extra = {}) {
    if (!transport)
      use_transport(transport_kind);
    std::vector<std::string> argv{sailor_bin(), "coordinator", "--listen", "127.0.0.1:0",
                               "--cluster", cluster_file, "--model",
                               model_file, "--job",
                               job_file, "--quorum", std::to_string(quorum),
                               "--settle-s", "30", "--heartbeat-ms",
                               std::to_string(heartbeat_ms), "--heartbeat-timeout-ms",
                               std::to_string(heartbeat_timeout_ms), "--transport",
                               transport_kind, "--token-file", token_file};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // These tests check the even layout unless they name another planner.
    if (std::find(extra.begin(), extra.end(), "--planner") == extra.end())
      argv.insert(argv.end(), {"--planner", "even"});
    port = static_cast<std::uint16_t>(std::stoi(start_listening(coordinator, argv, dir.path("coordinator"))));
  }

  child& start_node(const std::string& name, const std::string& zone, std::string devices = "cpu:2",
                    std::string gpu_type = "CPU") {
    nodes.push_back(std::make_unique<child>(
      std::vector<std::string>{sailor_bin("sailor-node"), "--join",
                               "127.0.0.1:" + std::to_string(port), "--zone", zone, "--devices",
                               devices, "--gpu-type", gpu_type, "--emulate-gpu", "--name", name, "--transport",
                               transport_kind, "--token-file", token_file},
      dir.path(name + ".out"), dir.path(name + ".err")));
    REQUIRE(nodes.back()->pid() > 0);
    return *nodes.back();
  }


};

}  // namespace

TEST_CASE_FIXTURE(cluster_fixture, "cluster: 4 nodes in 2 zones get roles, and a SIGKILLed node is reported within the heartbeat timeout") {
  SUBCASE("over UCX") { use_transport("ucx"); }
  SUBCASE("over TCP") { use_transport("tcp"); }
  start_coordinator(4);
  start_node("n1", "local-a");
  start_node("n2", "local-a");
  start_node("n3", "local-b");
  auto& n4 = start_node("n4", "local-b");
  bool assigned = eventually(20s, [&] { return all_roles_ready(4); });
  INFO(coordinator->err());
  REQUIRE(assigned);
  auto s = status();
  REQUIRE(s.ok());
  CHECK(s->plan_version == 1);
  CHECK(s->roles_total == 8);  // 4 nodes x 2 devices
  for (auto& n : s->nodes) {
    CHECK(n.state == "ready");
    CHECK(n.roles.size() == 2);
    for (auto& r : n.roles)
      CHECK(r.zone == n.inventory.zone);
  }
  // The command line shows the same, as JSON, with every node's heartbeat age once the zone
  // coordinators have reported (every heartbeat interval).
  nlohmann::json json;
  bool ages_known = eventually(5s, [&] {
    auto cli = run_command(sailor_bin() + " status 127.0.0.1:" + std::to_string(port) +
                           " --json --transport " + transport_kind + " --token-file " + token_file,
                           30);
    if (cli.exit_code != 0)
      return false;
    json = nlohmann::json::parse(cli.out);
    for (auto& n : json["nodes"])
      if (n["heartbeat_age_ms"].get<int>() < 0)
        return false;
    return true;
  });
  CHECK(ages_known);
  CHECK(json["all_roles_assigned"] == true);
  CHECK(json["nodes"].size() == 4);
  CHECK(json["zones"].size() == 2);
  for (auto& n : json["nodes"]) {
    CHECK(n["heartbeat_age_ms"].get<int>() <= heartbeat_timeout_ms);
    CHECK(n["roles"].size() == 2);
  }

  auto killed_at = steady_clock::now();
  n4.signal(SIGKILL);
  bool reported = eventually(milliseconds{heartbeat_timeout_ms * 3}, [&] { return has_event("node n4 lost"); });
  auto reported_after = duration_cast<milliseconds>(steady_clock::now() - killed_at);
  REQUIRE(reported);
  MESSAGE("SIGKILL reported after " << reported_after.count() << " ms (includes status polling)");
  CHECK(reported_after.count() <= heartbeat_timeout_ms);
  // Re-planned over the 3 nodes left, and every role is ready again.
  REQUIRE(eventually(10s, [&] { return all_roles_ready(3); }));
  s = status();
  REQUIRE(s.ok());
  CHECK(s->plan_version == 2);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: a stalled node is lost for missed heartbeats, a preempted one at once") {
  start_coordinator(3);
  start_node("n1", "local-a");
  auto& n2 = start_node("n2", "local-a");
  auto& n3 = start_node("n3", "local-b");
  REQUIRE(eventually(20s, [&] { return all_roles_ready(3); }));
  auto stopped_at = steady_clock::now();
  n3.signal(SIGSTOP);  // connection stays open, heartbeats stop
  bool reported = eventually(milliseconds{heartbeat_timeout_ms * 4},
                             [&] { return has_event("node n3 lost: missed heartbeats"); });
  auto after = duration_cast<milliseconds>(steady_clock::now() - stopped_at);
  REQUIRE(reported);
  MESSAGE("stalled node reported after " << after.count() << " ms");
  // Silence counts from the last heartbeat, which left up to one interval before the stop.
  CHECK(after.count() >= heartbeat_timeout_ms - 2 * heartbeat_ms);
  CHECK(after.count() <= heartbeat_timeout_ms + 2 * heartbeat_ms + 500);
  // SIGTERM: the node sends a preemption notice and leaves cleanly.
  n2.signal(SIGTERM);
  CHECK(n2.wait_exit(10s) == 0);
  REQUIRE(eventually(5s, [&] { return has_event("node n2 lost: preempted"); }));
  REQUIRE(eventually(10s, [&] { return all_roles_ready(1); }));
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: over UCX, a peer of another protocol version or zone is refused, listed in the status, and the others are served") {
  start_coordinator(2);
  start_node("n1", "local-a");
  REQUIRE(eventually(10s, [&] { return status().ok() && status()->nodes.size() == 1; }));
  // The transport's handshake refuses another protocol version.
  {
    sailor::comm::ucx_options options;
    options.common.local_name = "old-node";
    options.common.announced_version = sailor::comm::protocol_version + 41;
    auto old = sailor::comm::make_ucx_transport(options);
    REQUIRE(old.ok());
    auto l = sailor::actors::comm_connect(**old, "127.0.0.1", port, 5000);
    REQUIRE_FALSE(l.ok());
    CHECK(l.error().message.find("version") != std::string::npos);
  }
  auto& lost = start_node("x1", "moon-base");
  CHECK(lost.wait_exit(10s) == 3);
  CHECK(lost.err().find("unknown zone 'moon-base'") != std::string::npos);
  CHECK(has_event("refused node 'x1': unknown zone 'moon-base'"));
  start_node("n2", "local-b");
  REQUIRE(eventually(20s, [&] { return all_roles_ready(2); }));
  auto log = coordinator->err();
  CHECK(log.find("refused peer") != std::string::npos);  // comm's handshake, logged
  CHECK(log.find("refused node 'x1'") != std::string::npos);
  // Both refusals are in the coordinator's status: who, why and when.
  auto s = status();
  REQUIRE(s.ok());
  REQUIRE(s->refusals.size() == 2);
  CHECK(s->refusals[0].peer.rfind("127.0.0.1:", 0) == 0);
  CHECK(s->refusals[0].reason.find("version " + std::to_string(sailor::comm::protocol_version + 41)) !=
        std::string::npos);
  CHECK(s->refusals[1].peer.rfind("x1", 0) == 0);
  CHECK(s->refusals[1].reason.find("unknown zone 'moon-base'") != std::string::npos);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  for (auto& r : s->refusals) {
    CHECK(r.unix_ms <= now_ms);
    CHECK(r.unix_ms > now_ms - 120000);
  }
  // `sailor status` prints them.
  auto printed = run_command(sailor_bin() + " status 127.0.0.1:" + std::to_string(port) +
                              " --transport ucx --token-file " + token_file, 30);
  CHECK(printed.exit_code == 0);
  CHECK(printed.out.find("refused at the door") != std::string::npos);
  CHECK(printed.out.find("unknown zone 'moon-base'") != std::string::npos);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: over TCP, garbage and another protocol version are refused with a logged reason and the others are served") {
  use_transport("tcp");
  start_coordinator(2);
  start_node("n1", "local-a");
  REQUIRE(eventually(10s, [&] { return status().ok() && status()->nodes.size() == 1; }));

  // An unknown zone: the node is told why and exits with code 3.
  auto& lost = start_node("x1", "moon-base");
  CHECK(lost.wait_exit(10s) == 3);
  CHECK(lost.err().find("unknown zone 'moon-base'") != std::string::npos);

  // Garbage bytes on the port.
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    const char garbage[] = "GET / HTTP/1.1\r\nHost: sailor\r\n\r\n";
    CHECK(::send(fd, garbage, sizeof(garbage) - 1, MSG_NOSIGNAL) > 0);
    char buf[64];
    // The coordinator closes the connection (bounded: a receive timeout).
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    CHECK(::recv(fd, buf, sizeof(buf), 0) <= 0);
    ::close(fd);
  }
  // A frame of another protocol version: refused with a reply that says why.
  {
    // An authenticated peer whose bridge frames are of an older version.
    auto l = sailor::actors::comm_connect(*transport, "127.0.0.1", port);
    REQUIRE(l.ok());
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::vector<char>> replies;
    bool closed = false;
    (*l)->start(sailor::actors::link_handlers{
      [&](std::vector<char>&& frame) {
        std::lock_guard<std::mutex> guard{mutex};
        replies.push_back(std::move(frame));
        changed.notify_all();
      },
      [&](const std::string&) {
        std::lock_guard<std::mutex> guard{mutex};
        closed = true;
        changed.notify_all();
      }});
    auto old_frame = sailor::actors::encode_envelope_as_version(
      42, "agent", "supervisor", caf::make_message(sailor::actors::join_request{42, {}}));
    REQUIRE(old_frame.ok());
    (*l)->send(*old_frame);
    std::unique_lock<std::mutex> lock{mutex};
    REQUIRE(changed.wait_for(lock, 5s, [&] { return closed; }));
    REQUIRE_FALSE(replies.empty());
    auto reply = sailor::actors::decode_envelope(system, replies[0]);
    REQUIRE(reply.ok());
    REQUIRE(reply->body.match_elements<sailor::actors::join_refused>());
    CHECK(reply->body.get_as<sailor::actors::join_refused>(0).reason.find("protocol version 42") !=
          std::string::npos);
  }
  // Every refusal is in the coordinator's log and its status, and it still serves nodes.
  REQUIRE(eventually(5s, [&] { return has_event("refused peer") && has_event("protocol version 42"); }));
  CHECK(has_event("unknown zone 'moon-base'"));
  CHECK(has_event("garbage"));
  start_node("n2", "local-b");
  REQUIRE(eventually(20s, [&] { return all_roles_ready(2); }));
  auto log = coordinator->err();
  CHECK(log.find("refused node 'x1'") != std::string::npos);
  CHECK(log.find("protocol version 42") != std::string::npos);
  CHECK(log.find("garbage") != std::string::npos);
}

TEST_CASE_FIXTURE(cluster_fixture, "cluster: with Sailor's planner, emulated A100 nodes get TP groups inside a node") {
  cluster_file = configs + "/clusters/gcp-5-zones.yaml";
  model_file = configs + "/models/opt-350m.yaml";
  job_file = configs + "/jobs/max-throughput.yaml";
  start_coordinator(3, {"--planner", "sailor", "--sailor-data", std::string(SAILOR_DATA_DIR) + "/sailor"});
  start_node("g1", "us-central1-a", "cpu:4", "A100-40");
  start_node("g2", "us-central1-a", "cpu:4", "A100-40");
  start_node("g3", "us-central1-b", "cpu:4", "A100-40");
  bool assigned = eventually(30s, [&] { return all_roles_ready(3); });
  INFO(coordinator->err());
  REQUIRE(assigned);
  auto s = status();
  REQUIRE(s.ok());
  CHECK(s->roles_total <= 12);
  CHECK(s->stages >= 1);
  // A TP group never spans nodes here (every node has 4 devices): each node holds all ranks
  // of the replicas it serves.
  std::map<std::pair<int, int>, std::set<std::string>> holders;
  for (auto& n : s->nodes)
    for (auto& r : n.roles) {
      holders[{r.stage, r.replica}].insert(n.inventory.name);
      CHECK(r.gpu_type == "A100-40");
    }
  for (auto& [key, names] : holders)
    CHECK(names.size() == 1);
}

}  // namespace integration_cluster
