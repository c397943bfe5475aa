#include "sailor/actors/placement.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace sailor::actors;
using sailor::protocol::placement_kind;

namespace {

node_inventory make_node(std::string name, std::string zone, int devices,
                         std::string type = "CPU") {
  node_inventory n{std::move(name), std::move(zone), std::move(type), "host", {}};
  for (int k = 0; k < devices; ++k)
    n.devices.push_back(device_info{k, "cpu", 1ull << 30});
  return n;
}

std::vector<node_inventory> four_nodes() {
  return {make_node("n1", "a", 2), make_node("n2", "a", 2), make_node("n3", "b", 2),
          make_node("n4", "b", 2)};
}

}  // namespace

TEST_CASE("placement: the even plan over 2 zones of 4 devices uses every device once") {
  auto nodes = four_nodes();
  auto p = even_plan(nodes, 6, 8);
  REQUIRE(p.ok());
  CHECK(p->num_stages() == 4);
  int layers = 0;
  for (auto& s : p->stages) {
    CHECK(s.first_layer == layers);
    layers += s.num_layers;
    CHECK(s.replicas.size() == 2);
  }
  CHECK(layers == 6);
  REQUIRE_FALSE(place_replicas(*p, nodes).has_value());
  std::set<std::pair<std::string, int>> used;
  for (auto& s : p->stages)
    for (auto& r : s.replicas) {
      REQUIRE(r.nodes.size() == 1);
      auto zone = r.nodes[0] == "n1" || r.nodes[0] == "n2" ? "a" : "b";
      CHECK(r.zone == zone);
      CHECK(used.insert({r.nodes[0], r.devices[0]}).second);
    }
  CHECK(used.size() == 8);
  auto roles = roles_by_node(*p, 5);
  CHECK(roles.size() == 4);
  for (auto& [node, list] : roles) {
    CHECK(list.size() == 2);
    for (auto& role : list)
      CHECK(role.plan_version == 5);
  }
}

TEST_CASE("placement: the even plan with uneven zones keeps the smaller zone's depth") {
  std::vector<node_inventory> nodes{make_node("n1", "a", 2), make_node("n2", "a", 2),
                                    make_node("n3", "b", 2)};
  auto p = even_plan(nodes, 6, 8);
  REQUIRE(p.ok());
  CHECK(p->num_stages() == 2);
  CHECK(p->stages[0].replicas.size() == 3);  // 2 pipelines in zone a, 1 in zone b
  CHECK_FALSE(place_replicas(*p, nodes).has_value());
}

TEST_CASE("placement: TP groups stay on one node when one has room") {
  std::vector<node_inventory> nodes{make_node("n1", "a", 1), make_node("n2", "a", 4)};
  sailor::config::plan p;
  p.stages.push_back({0, 4, false, {sailor::config::replica{"CPU", "a", 4, {}, {}}}});
  REQUIRE_FALSE(place_replicas(p, nodes).has_value());
  auto& r = p.stages[0].replicas[0];
  CHECK(r.nodes == std::vector<std::string>{"n2", "n2", "n2", "n2"});
  CHECK(r.devices == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("placement: a replica that does not fit is an error naming it, and nothing changes") {
  auto nodes = four_nodes();
  sailor::config::plan p;
  p.stages.push_back({0, 3, false, {sailor::config::replica{"CPU", "a", 2, {}, {}}}});
  p.stages.push_back({3, 3, false,
                      {sailor::config::replica{"CPU", "b", 2, {}, {}},
                       sailor::config::replica{"CPU", "b", 4, {}, {}}}});
  auto before = p;
  auto err = place_replicas(p, nodes);
  REQUIRE(err.has_value());
  CHECK(err->kind == sailor::error_kind::infeasible);
  CHECK(err->field == "stages[1].replicas[1]");
  CHECK(p.stages[0].replicas[0].nodes.empty());
  // Unknown zone or GPU type: same.
  sailor::config::plan q;
  q.stages.push_back({0, 6, false, {sailor::config::replica{"H100-80", "a", 1, {}, {}}}});
  CHECK(place_replicas(q, nodes).has_value());
}

TEST_CASE("placement: pre-placed replicas are checked") {
  auto nodes = four_nodes();
  sailor::config::plan p;
  p.stages.push_back({0, 6, false,
                      {sailor::config::replica{"CPU", "a", 1, {"n1"}, {1}},
                       sailor::config::replica{"CPU", "a", 1, {"n1"}, {1}}}});
  auto err = place_replicas(p, nodes);
  REQUIRE(err.has_value());
  CHECK(err->field == "stages[0].replicas[1]");
  sailor::config::plan q;
  q.stages.push_back({0, 6, false, {sailor::config::replica{"CPU", "a", 1, {"n9"}, {0}}}});
  CHECK(place_replicas(q, nodes).has_value());
}

TEST_CASE("placement: no devices, no plan") {
  auto p = even_plan({}, 6, 8);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().kind == sailor::error_kind::infeasible);
}

// Which nodes each stage landed on.
static std::vector<std::set<std::string>> nodes_per_stage(const sailor::config::plan& p) {
  std::vector<std::set<std::string>> out;
  for (auto& s : p.stages) {
    out.emplace_back();
    for (auto& r : s.replicas)
      out.back().insert(r.nodes.begin(), r.nodes.end());
  }
  return out;
}

TEST_CASE("placement: a pinned stage lands on its node, and forbidden nodes stay unused") {
  auto nodes = four_nodes();
  auto p = even_plan(nodes, 6, 8);  // 4 stages of 2 replicas (one per zone), TP 1
  REQUIRE(p.ok());
  // Without rules, the first free devices win: stage 3 lands on n2 (zone a) and n4 (zone b).
  auto plain = *p;
  REQUIRE_FALSE(place_replicas(plain, nodes).has_value());
  auto before = nodes_per_stage(plain);
  REQUIRE(before[3] == std::set<std::string>{"n2", "n4"});
  std::vector<placement_rule> rules{{placement_kind::pin, "n1", 3}, {placement_kind::pin, "n3", 2}};
  auto pinned = *p;
  REQUIRE_FALSE(place_replicas(pinned, nodes, rules).has_value());
  auto after = nodes_per_stage(pinned);
  CHECK(after[3].count("n1"));
  CHECK(after[2].count("n3"));
  // Still every device once.
  std::set<std::pair<std::string, int>> used;
  for (auto& s : pinned.stages)
    for (auto& r : s.replicas)
      used.emplace(r.nodes[0], r.devices[0]);
  CHECK(used.size() == 8);

  // Forbid n2 for every stage and n4 for stage 0: a 1-stage plan of one replica per zone.
  sailor::config::plan q;
  q.stages.push_back({0, 6, false, {sailor::config::replica{"CPU", "a", 1, {}, {}},
                                    sailor::config::replica{"CPU", "a", 1, {}, {}},
                                    sailor::config::replica{"CPU", "b", 1, {}, {}}}});
  std::vector<placement_rule> forbid{{placement_kind::forbid, "n1", -1}, {placement_kind::forbid, "n3", 0}};
  REQUIRE_FALSE(place_replicas(q, nodes, forbid).has_value());
  auto on = nodes_per_stage(q);
  CHECK(on[0] == std::set<std::string>{"n2", "n4"});
  // A forbidden node is not used even when nothing else fits: the error says so.
  sailor::config::plan r;
  r.stages.push_back({0, 6, false, {sailor::config::replica{"CPU", "a", 3, {}, {}}}});
  auto err = place_replicas(r, nodes, {{placement_kind::forbid, "n2", 0}});
  REQUIRE(err.has_value());
  CHECK(err->field == "stages[0].replicas[0]");
  CHECK(err->message.find("placement rules") != std::string::npos);
  CHECK(r.stages[0].replicas[0].nodes.empty());
}

TEST_CASE("a rank's compute threads: the host's cores shared among the node's ranks, unless told") {
  auto nodes = four_nodes();
  auto p = even_plan(nodes, 6, 8);
  REQUIRE(p.ok());
  REQUIRE_FALSE(place_replicas(*p, nodes).has_value());
  // Each node lends its two devices to the even plan: two ranks; a node not in it runs none.
  CHECK(ranks_on_node(*p, "n1") == 2);
  CHECK(ranks_on_node(*p, "n4") == 2);
  CHECK(ranks_on_node(*p, "elsewhere") == 0);
  // Nodes of one machine (the same host in their addresses) share its cores.
  const std::vector<std::string> names{"n1", "n2", "n3", "n4"};
  CHECK(ranks_on_host(*p, names, {"10.0.0.1:7000", "10.0.0.1:7001", "10.0.0.2:7000", "10.0.0.3:7000"}, "n1") == 4);
  CHECK(ranks_on_host(*p, names, {"10.0.0.1:7000", "10.0.0.1:7001", "10.0.0.2:7000", "10.0.0.3:7000"}, "n3") == 2);
  CHECK(ranks_on_host(*p, {}, {}, "n3") == 2);  // no addresses: its own ranks
  // Two cores and one rank: both cores (OpenBLAS and LibTorch threads), not one.
  CHECK(rank_threads(0, 0, 1, 2) == 2);
  CHECK(rank_threads(0, 0, 2, 16) == 8);
  // More ranks than cores: one thread each, never 0.
  CHECK(rank_threads(0, 0, 4, 2) == 1);
  CHECK(rank_threads(0, 0, 0, 0) == 1);
  // sailor-node --threads, then the job's own count, override the share.
  CHECK(rank_threads(0, 3, 1, 2) == 3);
  CHECK(rank_threads(5, 3, 1, 2) == 5);
}

