#include "sailor/comm/shaping.hpp"

#include <doctest/doctest.h>

using namespace sailor;
using namespace sailor::comm;

TEST_CASE("shaping clock: latency after serialization, back-to-back messages queue") {
  config::zone_link l;
  l.latency_s = 0.02;
  l.bandwidth_gbytes_per_s = 0.05;  // 50 MB/s
  auto a = shape_step(l, 1.0, 0.0, 5e6);  // 0.1 s on the wire
  CHECK(a.link_free_s == doctest::Approx(1.1));
  CHECK(a.release_s == doctest::Approx(1.12));
  // Issued at the same time: waits for the link, then its own serialization.
  auto b = shape_step(l, 1.0, a.link_free_s, 5e6);
  CHECK(b.link_free_s == doctest::Approx(1.2));
  CHECK(b.release_s == doctest::Approx(1.22));
  // Issued after the link went idle: starts at once.
  auto c = shape_step(l, 5.0, b.link_free_s, 0);
  CHECK(c.release_s == doctest::Approx(5.02));
  CHECK(c.link_free_s == doctest::Approx(5.0));
}

TEST_CASE("shaping clock: a bandwidth curve decides the rate by message size") {
  config::zone_link l;
  l.latency_s = 0;
  l.bandwidth_gbytes_per_s = 1.0;
  l.curve = config::bandwidth_curve{{{1e3, 0.001}, {1e9, 1.0}}};
  auto small = shape_step(l, 0, 0, 1e3);
  CHECK(small.release_s == doctest::Approx(1e3 / l.bytes_per_s(1e3)));
  CHECK(l.bytes_per_s(1e3) < l.bytes_per_s(1e9));
}

TEST_CASE("shaping: links_of uses the cluster's explicit link in both directions") {
  config::cluster cl;
  cl.regions = {{"r1", {"a"}}, {"r2", {"b"}}};
  cl.zones = {{"a", "r1", {}}, {"b", "r2", {}}};
  cl.links = {{.from = "a", .to = "b", .latency_s = 0.033, .bandwidth_gbytes_per_s = 0.2}};
  auto lookup = links_of(cl);
  CHECK(lookup("b", "a").latency_s == doctest::Approx(0.033));
  CHECK(lookup("a", "a").latency_s == doctest::Approx(cl.defaults.same_zone.latency_s));
}
