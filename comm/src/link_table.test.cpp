#include "sailor/comm/link_table.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <doctest/doctest.h>

#include "sailor/comm/shaping.hpp"

using namespace sailor;
using namespace sailor::comm;

TEST_CASE("link change: the text form parses to a link in both directions") {
  auto l = parse_link_change("zone-a:zone-b=50,5", "--link-change");
  REQUIRE_MESSAGE(l.ok(), l.error().to_string());
  CHECK(l->from == "zone-a");
  CHECK(l->to == "zone-b");
  CHECK(l->latency_s == doctest::Approx(0.050));
  CHECK(l->bytes_per_s(1e6) == doctest::Approx(5e6));
  CHECK(link_change_text(*l) == "zone-a:zone-b=50,5");
}

TEST_CASE("link change: bad text is refused naming the option and what was expected") {
  for (const char* bad : {"zone-a:zone-b", "zone-a=50,5", "zone-a:zone-a=50,5", ":b=1,1",
                          "a:b=50", "a:b=-1,5", "a:b=50,0", "a:b=50,x", "a:b=50,5mb", "a:b=nan,5"}) {
    CAPTURE(bad);
    auto l = parse_link_change(bad, "--link-change");
    REQUIRE(!l.ok());
    CHECK(l.error().field == "--link-change");
    CHECK(l.error().message.find("ZONE_A:ZONE_B=LATENCY_MS,MBPS") != std::string::npos);
  }
}

TEST_CASE("link change: a table over the configured links, looked up at every call") {
  config::zone_link configured;
  configured.latency_s = 0.001;
  configured.bandwidth_gbytes_per_s = 1;
  auto table = std::make_shared<link_table>();
  auto lookup = overridden(table, [configured](const std::string&, const std::string&) {
    return configured;
  });
  CHECK(lookup("a", "b").latency_s == doctest::Approx(0.001));
  table->set(*parse_link_change("b:a=80,2", "x"));
  // Either direction, from the next call on; other pairs and the zone itself keep theirs.
  CHECK(lookup("a", "b").latency_s == doctest::Approx(0.080));
  CHECK(lookup("b", "a").bytes_per_s(1e6) == doctest::Approx(2e6));
  CHECK(lookup("a", "b").from == "a");
  CHECK(lookup("a", "c").latency_s == doctest::Approx(0.001));
  CHECK(lookup("a", "a").latency_s == doctest::Approx(0.001));
  // The shaper's clock on the changed link: 1 MB takes 0.5 s on the wire, then 80 ms.
  auto step = shape_step(lookup("a", "b"), 0, 0, 1e6);
  CHECK(step.release_s == doctest::Approx(0.58));
  table->set(*parse_link_change("a:b=10,100", "x"));
  CHECK(lookup("b", "a").latency_s == doctest::Approx(0.010));
  CHECK(table->size() == 1);
}

TEST_CASE("link change file: every line or none, a bad line named with its number") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sailor-link-file-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto good = (dir / "good").string(), bad = (dir / "bad").string();
  std::ofstream(good) << "# changed links\n\nzone-a:zone-b=50,5\n  zone-b:zone-c=1,1000\r\n";
  std::ofstream(bad) << "zone-a:zone-b=50,5\nzone-b:zone-c=1\n";
  auto links = read_link_changes(good);
  REQUIRE_MESSAGE(links.ok(), links.error().to_string());
  REQUIRE(links->size() == 2);
  CHECK((*links)[1].to == "zone-c");
  CHECK((*links)[1].bandwidth_gbytes_per_s == doctest::Approx(1.0));
  auto refused = read_link_changes(bad);
  REQUIRE(!refused.ok());
  CHECK(refused.error().file == bad);
  CHECK(refused.error().line == 2);
  auto missing = read_link_changes((dir / "none").string());
  REQUIRE(!missing.ok());
  CHECK(missing.error().file == (dir / "none").string());
  std::filesystem::remove_all(dir);
}
