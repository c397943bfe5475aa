// Micro-batch sizes as the profile measured them: any size (not only powers of two), and
// between two measured sizes the time per sequence interpolated, not one size scaled.
#include "sailor/simulator/simulator.hpp"

#include <doctest/doctest.h>

#include "test_fixtures.hpp"

using namespace sailor;
using namespace sailor::simulator;
using namespace sailor::simulator::testing;

namespace {

// "fast" measured at 1, 3 and 12 sequences: 1, 0.8 and 0.5 ms of forward per sequence and
// layer (a CPU's matrix products get more efficient with more rows), backward twice that.
struct measured_sizes : fixture {
  measured_sizes() {
    auto& g = profile.by_gpu["fast"];
    g.times.clear();
    for (auto [mbs, per_sequence] : {std::pair{1, 1e-3}, {3, 0.8e-3}, {12, 0.5e-3}})
      g.times[mbs][1] = std::vector<config::layer_time>(
        4, config::layer_time{per_sequence * mbs, 2 * per_sequence * mbs, 0});
  }
  sim_context context() {
    sim_options o;
    o.profile_smoothing_octaves = 0;  // the measured points alone
    o.micro_batches = {1, 6};         // 6 was not measured
    return make(o);
  }
};

}  // namespace

TEST_CASE_FIXTURE(measured_sizes, "a size the profile measured is used as measured, powers of two or not") {
  auto ctx = context();
  auto whole = simulate(ctx, make_plan(12, 12, {{4, {rep("fast", "a")}}}));
  REQUIRE_MESSAGE(whole.ok(), (whole.ok() ? "" : whole.error().to_string()));
  CHECK(whole->stages[0].micro_batches == 1);
  CHECK(whole->stages[0].forward_s == doctest::Approx(4 * 12 * 0.5e-3));
  CHECK(whole->stages[0].backward_s == doctest::Approx(4 * 12 * 1e-3));
  auto three = simulate(ctx, make_plan(3, 12, {{4, {rep("fast", "a")}}}));
  REQUIRE(three.ok());
  CHECK(three->stages[0].micro_batches == 4);
  CHECK(three->stages[0].forward_s == doctest::Approx(4 * 3 * 0.8e-3));
  // The whole batch in one micro-batch is the faster plan, as measured.
  CHECK(whole->iteration_time_s < three->iteration_time_s);
}

TEST_CASE_FIXTURE(measured_sizes, "between two measured sizes the time per sequence is interpolated in log2 of the size") {
  auto ctx = context();
  auto six = simulate(ctx, make_plan(6, 12, {{4, {rep("fast", "a")}}}));
  REQUIRE_MESSAGE(six.ok(), (six.ok() ? "" : six.error().to_string()));
  // 6 is halfway (in octaves) between 3 and 12: 0.65 ms per sequence, not 3's 0.8 or 12's 0.5
  // scaled to 6 sequences (what the nearest size alone gave).
  const double per_sequence = 0.5 * 0.8e-3 + 0.5 * 0.5e-3;
  CHECK(six->stages[0].forward_s == doctest::Approx(4 * 6 * per_sequence));
  CHECK(six->stages[0].backward_s == doctest::Approx(4 * 6 * 2 * per_sequence));
}
