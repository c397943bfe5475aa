// The rendezvous store between two actor systems joined by the bridge (a link pair in memory): ranks
// of a "node" meet through the "coordinator"'s store, waits are bounded, old plan versions go.
#include "sailor/actors/rendezvous.hpp"

#include <doctest/doctest.h>

#include <thread>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/runtime.hpp"

using namespace sailor::actors;
using namespace std::chrono_literals;

namespace {

std::vector<char> chars(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

struct coordinator_and_node {
  runtime_config cfg_a;
  runtime_config cfg_b;
  caf::actor_system coordinator_system{cfg_a};
  caf::actor_system node_system{cfg_b};
  bridge coordinator_links{coordinator_system};
  bridge node_links{node_system};
  std::shared_ptr<rendezvous_client> client;
  caf::actor server;

  explicit coordinator_and_node(rendezvous_limits limits = {}) {
    server = spawn_rendezvous_server(coordinator_system, limits);
    coordinator_links.publish("store", server);
    auto [left, right] = local_link_pair();
    coordinator_links.adopt(left);
    auto peer = node_links.adopt(right);
    auto* links = &node_links;
    client = rendezvous_client::start(
      node_system, node_links.remote_actor(peer, "store"),
      [links](const std::string& name, const caf::actor& a) { links->publish(name, a); });
  }
  ~coordinator_and_node() {
    client.reset();
    // As the coordinator does: its pending expiries must not keep the system alive.
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    node_links.close();
    coordinator_links.close();
  }
};

}  // namespace

TEST_CASE("rendezvous: a get waits for the set of another rank, across the bridge") {
  coordinator_and_node lab;
  auto store = lab.client->scope(3);
  std::thread late_rank([&] {
    std::this_thread::sleep_for(50ms);  // sleep override: the get must be waiting first
    REQUIRE_FALSE(store->set("rank1/address", chars("10.0.0.2:4000")));
  });
  auto got = store->get("rank1/address", 5s);
  late_rank.join();
  REQUIRE(got);
  CHECK(text(*got) == "10.0.0.2:4000");
  // Keys are per plan version: version 4 does not see version 3's key.
  auto other = lab.client->scope(4)->get("rank1/address", 100ms);
  CHECK_FALSE(other);
}

TEST_CASE("rendezvous: a get of a key nobody sets fails after its deadline") {
  coordinator_and_node lab;
  auto begin = std::chrono::steady_clock::now();
  auto got = lab.client->scope(1)->get("never", 200ms);
  auto waited = std::chrono::steady_clock::now() - begin;
  REQUIRE_FALSE(got);
  CHECK(got.error().message.find("timed out") != std::string::npos);
  CHECK(waited >= 200ms);
  CHECK(waited < 2200ms);  // answered by the server, not by the client's margin
}

TEST_CASE("rendezvous: versions older than the newest kept ones are dropped, waiters told") {
  rendezvous_limits limits;
  limits.keep_versions = 2;
  coordinator_and_node lab{limits};
  REQUIRE_FALSE(lab.client->set(1, "k", chars("one")));
  auto waiting = std::thread([&] {
    auto got = lab.client->get(1, "missing", 5s);
    REQUIRE_FALSE(got);
    CHECK(got.error().message.find("no longer current") != std::string::npos);
  });
  std::this_thread::sleep_for(50ms);  // sleep override: the get must be waiting first
  REQUIRE_FALSE(lab.client->set(2, "k", chars("two")));
  REQUIRE_FALSE(lab.client->set(3, "k", chars("three")));
  waiting.join();
  auto v3 = lab.client->get(3, "k", 1s);
  REQUIRE(v3);
  CHECK(text(*v3) == "three");
  CHECK_FALSE(lab.client->get(1, "k", 1s));
}

TEST_CASE("rendezvous: an oversized key or value is refused and stored nowhere") {
  rendezvous_limits limits;
  limits.max_value_bytes = 16;
  coordinator_and_node lab{limits};
  REQUIRE_FALSE(lab.client->set(1, "big", std::vector<char>(17, 'x')));
  auto got = lab.client->get(1, "big", 200ms);
  REQUIRE_FALSE(got);
  auto key = lab.client->get(1, std::string(2000, 'k'), 1s);
  REQUIRE_FALSE(key);
  CHECK(key.error().message.find("key of 2000 bytes") != std::string::npos);
}

TEST_CASE("rendezvous: with scopes required, only a plan's nodes are answered and a key stays its setter's") {
  runtime_config cfg;
  caf::actor_system system{cfg};
  rendezvous_limits limits;
  limits.require_scope = true;
  auto server = spawn_rendezvous_server(system, limits);
  caf::scoped_actor self{system};
  auto ask = [&](std::int64_t version, const std::string& key, const std::string& node) {
    self->send(server, sailor::protocol::store_request{1, version, key, false, {}, 100, node});
    std::string out;
    self->receive([&](const sailor::protocol::store_reply& r) { out = r.found ? text(r.value) : "!" + r.error; },
                  caf::after(5s) >> [&] { out = "no answer"; });
    return out;
  };
  auto put = [&](std::int64_t version, const std::string& key, const std::string& value,
                 const std::string& node) {
    self->send(server, sailor::protocol::store_request{0, version, key, true, chars(value), 0, node});
  };
  self->send(server, store_scope{5, {"a", "b"}});
  put(5, "rank0", "10.0.0.1:1", "a");
  CHECK(ask(5, "rank0", "b") == "10.0.0.1:1");
  // Another member cannot overwrite it; a node outside the plan neither reads nor writes.
  put(5, "rank0", "10.6.6.6:1", "b");
  put(5, "rank1", "10.6.6.6:1", "c");
  CHECK(ask(5, "rank0", "a") == "10.0.0.1:1");
  CHECK(ask(5, "rank0", "c") == "!node 'c' has no rank in plan version 5");
  CHECK(ask(5, "rank1", "a") == "!timed out");
  // A plan version nobody opened is not made, so it cannot push plan 5 out.
  for (std::uint64_t v = 100; v < 110; ++v)
    put(v, "k", "x", "a");
  CHECK(ask(100, "k", "a") == "!plan version 100 has no rendezvous open");
  CHECK(ask(5, "rank0", "a") == "10.0.0.1:1");
  caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
}
