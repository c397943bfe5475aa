// The live replay's script: a slice of a timeline as nodes to start and stop, the stops without
// notice drawn from a seed, bad options refused by name, and the GPU-hours priced.
#include "sailor/planner/spot_live.hpp"

#include <doctest/doctest.h>

#include "strings.hpp"

#include "sailor/config/pools.hpp"

using namespace sailor;
using namespace sailor::planner;

namespace {

// Two zones of V100s, five ticks of 300 s.
availability_timeline two_zones(std::vector<std::vector<int>> counts) {
  availability_timeline t;
  t.tick_s = 300;
  t.columns = {{"V100-16", "us-east-2b", "east.json"}, {"V100-16", "us-west-2a", "west.json"}};
  for (std::size_t k = 0; k < counts.size(); ++k) t.start_s.push_back(300.0 * static_cast<double>(k));
  t.counts = std::move(counts);
  t.end_s = 300.0 * static_cast<double>(t.counts.size());
  return t;
}

using sailor::testing::contains;

}  // namespace

TEST_CASE("a slice becomes nodes capped per zone, with a change per column where the cap shows it") {
  auto t = two_zones({{16, 0}, {16, 4}, {3, 4}, {1, 16}, {0, 16}});
  live_slice_options o;
  o.nodes_per_zone = 2;
  o.from_tick = 1;
  o.to_tick = 5;
  auto s = make_live_script(t, o);
  REQUIRE(s);
  CHECK(s->start_s == std::vector<double>{0, 300, 600, 900});
  CHECK(s->end_s == doctest::Approx(1200));
  CHECK(s->initial_nodes() == 4);
  // 16 -> 3 stays at the cap of 2; 3 -> 1 stops one; 1 -> 0 stops one more.
  REQUIRE(s->changes.size() == 2);
  CHECK(s->changes[0].tick == 2);
  CHECK(s->changes[0].at_s == doctest::Approx(600));
  CHECK(s->changes[0].column == 0);
  CHECK(s->changes[0].delta == -1);
  CHECK(s->changes[1].tick == 3);
  CHECK(s->changes[1].delta == -1);
  CHECK(s->stops == 2);
  CHECK(s->starts == 0);
  CHECK(s->tick_at(0) == 0);
  CHECK(s->tick_at(899) == 2);
  CHECK(s->tick_at(5000) == 3);
}

TEST_CASE("the stops without notice are the chosen fraction, the same for the same seed") {
  std::vector<std::vector<int>> counts;
  for (int k = 0; k < 400; ++k) counts.push_back({k % 2 ? 0 : 4, 4});  // 200 falls of 4 nodes
  auto t = two_zones(counts);
  live_slice_options o;
  o.nodes_per_zone = 4;
  o.kill_fraction = 0.25;
  o.seed = 7;
  auto a = make_live_script(t, o);
  auto b = make_live_script(t, o);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->stops == 800);
  CHECK(a->starts == 796);
  CHECK(a->stops_without_notice == b->stops_without_notice);
  CHECK(a->stops_without_notice > 800 * 0.2);
  CHECK(a->stops_without_notice < 800 * 0.3);
  o.seed = 8;
  auto c = make_live_script(t, o);
  REQUIRE(c);
  bool differ = false;
  for (std::size_t i = 0; i < a->changes.size(); ++i)
    differ = differ || a->changes[i].without_notice != c->changes[i].without_notice;
  CHECK(differ);
  o.kill_fraction = 0;
  CHECK(make_live_script(t, o)->stops_without_notice == 0);
  o.kill_fraction = 1;
  CHECK(make_live_script(t, o)->stops_without_notice == 800);
}

TEST_CASE("bad options and a slice without capacity at its start are refused by name") {
  auto t = two_zones({{0, 0}, {2, 1}, {2, 2}});
  live_slice_options o;
  auto empty = make_live_script(t, o);
  REQUIRE_FALSE(empty);
  CHECK(empty.error().field == "--from");
  CHECK(contains(empty.error().message, "tick 0"));
  CHECK(contains(empty.error().file, "east.json"));
  o.from_tick = 1;  // the first tick with capacity: these options make a script
  CHECK(make_live_script(t, o));
  // The option named in the refusal of these good options once `spoil` changed one of them.
  auto refused_option = [&](auto spoil) {
    live_slice_options bad = o;
    spoil(bad);
    auto script = make_live_script(t, bad);
    REQUIRE_FALSE(script);
    return script.error().field;
  };
  CHECK(refused_option([](live_slice_options& b) { b.from_tick = 3; }) == "--from");
  CHECK(refused_option([](live_slice_options& b) { b.to_tick = 1; }) == "--to");
  CHECK(refused_option([](live_slice_options& b) { b.to_tick = 4; }) == "--to");
  CHECK(refused_option([](live_slice_options& b) { b.nodes_per_zone = 0; }) == "--nodes-per-zone");
  CHECK(refused_option([](live_slice_options& b) { b.kill_fraction = 1.5; }) == "--kill-fraction");
}

TEST_CASE("GPU-hours are priced at the catalog's spot and on-demand prices") {
  auto catalog = config::gpu_catalog::builtin();
  const auto* v100 = catalog.find("V100-16");
  REQUIRE(v100);
  std::vector<std::string> unpriced;
  auto d = price_usage({{"V100-16", "a", 2.0}, {"V100-16", "b", 0.5}, {"NoSuchGPU", "a", 9}}, catalog, &unpriced);
  CHECK(d.spot == doctest::Approx(2.5 * v100->spot_usd_per_hour));
  CHECK(d.on_demand == doctest::Approx(2.5 * v100->on_demand_usd_per_hour));
  CHECK(unpriced == std::vector<std::string>{"NoSuchGPU"});
}

TEST_CASE("a cluster's on-demand pools are columns the trace never changes, priced on demand") {
  auto t = two_zones({{2, 2}, {0, 0}, {0, 0}, {2, 1}});
  live_slice_options o;
  o.nodes_per_zone = 1;
  auto s = make_live_script(t, o);
  REQUIRE(s);
  const auto changes = s->changes.size();
  config::cluster c;
  c.name = "anchor";
  c.zones = {{"us-east-2b", "us-east-2", {{"V100-16", 16}, {"V100-16/on-demand", 2}}},
             {"us-west-2a", "us-west-2", {{"V100-16", 16}}}};
  CHECK(add_on_demand_pools(*s, c, o.nodes_per_zone) == 1);
  REQUIRE(s->columns.size() == 3);
  CHECK(s->columns[2].gpu_type == "V100-16/on-demand");
  CHECK(s->columns[2].zone == "us-east-2b");
  for (const auto& row : s->nodes) CHECK(row[2] == 1);  // capped at --nodes-per-zone, every tick
  CHECK(s->changes.size() == changes);                  // the trace's changes only
  for (const auto& ch : s->changes) CHECK(ch.column < 2);
  CHECK(s->initial_nodes() == 3);
  // The pool's GPU-hours cost the on-demand price at both of price_usage's prices.
  auto catalog = config::gpu_catalog::builtin();
  REQUIRE(config::add_pool_type("V100-16/on-demand", catalog));
  const double od = catalog.find("V100-16")->on_demand_usd_per_hour;
  auto d = price_usage({{"V100-16/on-demand", "us-east-2b", 2.0}}, catalog);
  CHECK(d.spot == doctest::Approx(2.0 * od));
  CHECK(d.on_demand == doctest::Approx(2.0 * od));
  // A cluster without pools adds nothing.
  config::cluster plain;
  plain.zones = {{"us-east-2b", "us-east-2", {{"V100-16", 16}}}};
  CHECK(add_on_demand_pools(*s, plain, 1) == 0);
}
