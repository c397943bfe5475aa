#include "sailor/simulator/correction.hpp"

#include <cmath>
#include <limits>

#include <doctest/doctest.h>

using sailor::simulator::correction_options;
using sailor::simulator::speed_correction;
using sailor::simulator::corrected_links;
using sailor::simulator::link_key;
namespace config = sailor::config;

TEST_CASE("correction: the median ratio per GPU type, not the last sample") {
  speed_correction c;
  CHECK(c.factor("CPU") == 1.0);  // nothing measured: the simulator as is
  CHECK(c.add("CPU", 0.10, 0.20).empty());
  CHECK(c.add("CPU", 0.10, 0.21).empty());
  CHECK(c.factor("CPU") == 1.0);  // fewer than min_samples
  CHECK(c.add("CPU", 0.10, 0.90).empty());  // one slow iteration
  CHECK(c.factor("CPU") == doctest::Approx(2.1));
  CHECK(c.add("CPU", 0.10, 0.19).empty());
  CHECK(c.factor("CPU") == doctest::Approx(2.05));
  CHECK(c.factor("A100") == 1.0);  // another type is not corrected by CPU's samples
}

TEST_CASE("correction: a lasting change moves the factor within the window") {
  correction_options o;
  o.window = 5;
  speed_correction c{o};
  for (int i = 0; i < 5; ++i)
    CHECK(c.add("CPU", 0.1, 0.1).empty());
  CHECK(c.factor("CPU") == doctest::Approx(1.0));
  for (int i = 0; i < 3; ++i)
    CHECK(c.add("CPU", 0.1, 0.3).empty());
  CHECK(c.factor("CPU") == doctest::Approx(3.0));
  CHECK(c.samples("CPU") == 5);
}

TEST_CASE("correction: absurd measurements are not trusted") {
  speed_correction c;
  CHECK_FALSE(c.add("CPU", 0.1, 0.0).empty());
  CHECK_FALSE(c.add("CPU", 0.1, -1.0).empty());
  CHECK_FALSE(c.add("CPU", 0.1, std::numeric_limits<double>::quiet_NaN()).empty());
  CHECK_FALSE(c.add("CPU", 0.0, 0.1).empty());  // nothing predicted: nothing to compare
  CHECK(c.samples("CPU") == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK(c.add("CPU", 0.1, 0.2).empty());
    CHECK(c.add("A100", 0.1, 0.1).empty());
  }
  // A thousand times its own history, or its peers', is a broken clock, not a slow node.
  CHECK(c.add("CPU", 0.1, 0.2 * 5000).find("own median") != std::string::npos);
  CHECK(c.add("H100", 0.1, 0.1 * 5000).find("other types") != std::string::npos);
  CHECK(c.add("H100", 0.1, 0.1 / 5000).find("other types") != std::string::npos);
  CHECK(c.refused() == 7);
  CHECK(c.factor("CPU") == doctest::Approx(2.0));
  CHECK(c.samples("H100") == 0);
  // A 3x straggler is real and kept.
  CHECK(c.add("CPU", 0.1, 0.6).empty());
}

TEST_CASE("correction: applied to a profile, each type by its own factor") {
  sailor::config::model_profile p;
  p.by_gpu["CPU"].times[1][1] = {{1.0, 2.0, 0.5}};
  p.by_gpu["A100"].times[1][1] = {{1.0, 2.0, 0.5}};
  speed_correction c;
  for (int i = 0; i < 3; ++i)
    c.add("CPU", 0.1, 0.15);
  auto q = c.apply(p);
  CHECK(q.by_gpu["CPU"].times[1][1][0].forward_s == doctest::Approx(1.5));
  CHECK(q.by_gpu["CPU"].times[1][1][0].backward_s == doctest::Approx(3.0));
  CHECK(q.by_gpu["CPU"].times[1][1][0].update_s == doctest::Approx(0.75));
  CHECK(q.by_gpu["A100"].times[1][1][0].forward_s == doctest::Approx(1.0));
}

TEST_CASE("correction: per zone pair, links take the factor times as long") {
  config::cluster cl;
  cl.regions = {{"r1", {"a", "b"}}, {"r2", {"c"}}};
  cl.zones = {{"a", "r1", {}}, {"b", "r1", {}}, {"c", "r2", {}}};
  cl.links = {{.from = "a", .to = "b", .latency_s = 0.01, .bandwidth_gbytes_per_s = 0.1}};
  speed_correction links;
  CHECK(link_key("b", "a") == link_key("a", "b"));
  // Robust: the median of the samples, one outlier moves nothing.
  for (double measured : {0.2, 0.2, 0.2, 5.0, 0.2})
    CHECK(links.add(link_key("b", "a"), 0.1, measured).empty());
  CHECK(links.factor(link_key("a", "b")) == doctest::Approx(2.0));
  for (int k = 0; k < 3; ++k)
    CHECK(links.add(link_key("a", "c"), 0.1, 0.05).empty());
  const auto corrected = corrected_links(cl, links);
  const double bytes = 64e6;
  CHECK(corrected.link("a", "b").transfer_s(bytes) ==
        doctest::Approx(2.0 * cl.link("a", "b").transfer_s(bytes)));
  CHECK(corrected.link("c", "a").transfer_s(bytes) ==
        doctest::Approx(0.5 * cl.link("a", "c").transfer_s(bytes)));
  // Pairs without samples stay as configured.
  CHECK(corrected.link("b", "c").transfer_s(bytes) ==
        doctest::Approx(cl.link("b", "c").transfer_s(bytes)));
}

TEST_CASE("the correction forgets the iterations a slowed node measured, once it is found out") {
  speed_correction c;
  for (int k = 1; k <= 4; ++k) CHECK(c.add("CPU", 0.1, 0.12, k) == "");
  // A node slowed down from iteration 5: its iterations take three times as long.
  for (int k = 5; k <= 8; ++k) CHECK(c.add("CPU", 0.1, 0.36, k) == "");
  CHECK(c.factor("CPU") == doctest::Approx(2.4));  // the median moved half-way to the straggler
  CHECK(c.forget_from("CPU", 5) == 4);
  CHECK(c.samples("CPU") == 4);
  CHECK(c.factor("CPU") == doctest::Approx(1.2));
  CHECK(c.forget_from("GPU", 0) == 0);  // no samples of that type
}
