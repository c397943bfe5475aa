// Transfers between zones obey the emulated link, which holds the real bytes of every
// transfer (comm's link shaper under the data plane's channel): with a 100 ms link between
// the zones of two stages, the iteration grows by the link's latency on every round trip of
// the 1F1B schedule; with a 50 ms link between two data-parallel replicas, every hierarchical
// gradient all-reduce (one per layer) and the loss all-reduce cross it twice. The loss curve
// does not change. The tests assert floors only (the link never delivers early); how close the
// runtime holds to the link is bench/train_shaping's figure.

// Built only with LibTorch (the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/data_plane.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <utility>

#include "zoned_training.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_shaping {

namespace {

using namespace sailor;
using namespace std::chrono_literals;
using testing::link_of;
using testing::median_after_first;
using testing::train_zoned;
using testing::make_plan;
using testing::zoned_run;
using testing::zoned_stage;

train::train_options options() {
  train::train_options o;
  o.seed = 7;
  o.learning_rate = 3e-3;
  o.torch_threads = 1;
  o.timeout = 30s;
  return o;
}

// `plan` trained without links and with `link`; both without errors, and to the same losses
// (the link only delays: the same arithmetic).
std::pair<zoned_run, zoned_run> plain_and_shaped(const config::plan& plan, int iterations,
                                                 const config::zone_link& link) {
  auto plain = train_zoned(plan, iterations, options());
  auto o = options();
  o.links = {link};
  auto shaped = train_zoned(plan, iterations, o);
  for (const auto& e : plain.errors) CHECK_MESSAGE(e.empty(), e);
  for (const auto& e : shaped.errors) CHECK_MESSAGE(e.empty(), e);
  REQUIRE(plain.losses.size() == static_cast<std::size_t>(iterations));
  REQUIRE(shaped.losses.size() == static_cast<std::size_t>(iterations));
  CHECK(shaped.losses == plain.losses);
  return {std::move(plain), std::move(shaped)};
}

}  // namespace

TEST_CASE("train: a 100 ms link between two stages' zones delays each pipeline round trip") {
  // 4 micro-batches; 16 KiB activations take 16 us each at 1 GB/s, negligible.
  const auto plan = make_plan({zoned_stage(0, 3, "zone-a"), zoned_stage(3, 3, "zone-b")});
  const double latency = 0.100;
  const auto [plain, shaped] = plain_and_shaped(plan, 6, link_of("zone-a", "zone-b", latency, 1.0));

  // 1F1B on 2 stages keeps 2 micro-batches in flight, so 4 micro-batches make 2 round trips
  // over the link, each forward and back: 4 latencies per iteration when the latency is far
  // above the compute (here a few ms per micro-batch; compute hides a little of it). The loss
  // and norm all-reduce at the end crosses the link too: a ring of 2 zones, 2 steps.
  const double expected = 4 * latency + 2 * latency;
  // Two round trips one after the other and the all-reduce: 6 latencies is a floor on every
  // shaped iteration of the first stage.
  auto total = [](const train::iteration_telemetry& t) { return t.total_s; };
  CHECK(median_after_first(shaped, 0, total) > 0.95 * expected);
}

TEST_CASE("train: ranks in one zone, or without a link between their zones, are not shaped") {
  CHECK_FALSE(train::find_link({}, "a", "b").has_value());
  const auto l = link_of("a", "b", 5.0, 0);
  CHECK(train::find_link({l}, "b", "a").has_value());
  CHECK_FALSE(train::find_link({l}, "a", "a").has_value());
  CHECK_FALSE(train::find_link({l}, "a", "c").has_value());
  CHECK_FALSE(train::find_link({l}, "", "b").has_value());
  // A plan in one zone with a slow link declared elsewhere is not held by it: an iteration
  // over that link would take at least six of its latencies (30 s, past the receive timeout).
  auto o = options();
  o.links = {l};
  auto got = train_zoned(make_plan({zoned_stage(0, 3, "a"), zoned_stage(3, 3, "a")}), 2, o);
  for (const auto& e : got.errors) CHECK_MESSAGE(e.empty(), e);
  REQUIRE(got.telemetry[0].size() == 2);
  CHECK(got.telemetry[0][1].total_s < l.latency_s);
}

TEST_CASE("train: a 50 ms link between two data-parallel replicas holds every all-reduce for it") {
  // DP 2 over one stage of the 6 layers (2 micro-batches per replica): every all-reduce
  // crosses the link (testing::dp_link_all_reduce_s).
  const auto link = link_of("zone-a", "zone-b", 0.050, 0.1);
  const double expected = testing::dp_link_all_reduce_s(link);
  const auto [plain, shaped] = plain_and_shaped(make_plan({zoned_stage(0, 6, "zone-a", "zone-b")}), 3, link);

  auto all_reduce = [](const train::iteration_telemetry& t) { return t.all_reduce_s; };
  auto total = [](const train::iteration_telemetry& t) { return t.total_s; };
  for (int r = 0; r < 2; ++r) {
    // Bounded below: the link never delivers early. The first layer reduced overlaps the
    // backward of the others (a few ms here).
    CHECK(median_after_first(shaped, r, all_reduce) > expected - 0.02);
    CHECK(median_after_first(shaped, r, total) > expected - 0.02);
  }
}

}  // namespace integration_train_shaping
#endif  // __has_include(<sailor/models/shapes.hpp>)
