// DiLoCo across regions in the training runtime (plan.local_sgd): ranks as threads, the
// regions' zones joined by comm's TCP transport. The regions train apart and hold the same
// weights right after an exchange without overlap; a region's replicas agree every
// iteration; only the exchanges cross zones, in the bytes their encoding says; int8 packs and
// unpacks within half a step of its scale.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/gpt.hpp>)

#include "../train/src/int8_pack.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "temp_file.hpp"
#include "zoned_training.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_local_sgd {

using namespace sailor;
using testing::make_plan;
using testing::zoned_stage;

namespace {

// One stage of the tiny GPT's 6 layers, a replica in each of `zones`, regions "east" (zone
// a) and "west" (zone b), an exchange every `inner_steps` iterations.
config::plan diloco_plan(const std::vector<std::string>& zones, int inner_steps) {
  auto s = testing::stage(0, 6, std::vector<int>(zones.size(), 1));
  for (std::size_t j = 0; j < zones.size(); ++j) s.replicas[j].zone = zones[j];
  auto p = make_plan({s});
  p.local_sgd = config::local_sgd_plan{inner_steps, {{"east", {"a"}}, {"west", {"b"}}}};
  return p;
}

// FedAvg as DiLoCo's outer step (lr 1, no momentum): right after an exchange without
// overlap every replica holds the regions' mean.
train::train_options averaging(config::delta_compression compression = config::delta_compression::none) {
  auto o = testing::options_for(train::optimizer_kind::adamw);
  o.outer.across_regions = config::across_regions_mode::diloco;
  o.outer.outer_optimizer = config::outer_optimizer_kind::sgd;
  o.outer.outer_lr = 1.0;
  o.outer.outer_momentum = 0.0;
  o.outer.overlap_steps = 0;
  o.outer.compression = compression;
  return o;
}

struct run_record {
  std::vector<std::vector<std::uint64_t>> hashes;  // [rank][iteration]
  std::vector<std::vector<double>> losses;         // [rank][iteration]
  std::vector<std::uint64_t> channel_bytes;        // per rank, at the end
  std::vector<std::int64_t> payload_bytes;         // per rank, at the end
  std::vector<std::uint64_t> finished_hashes;      // per rank, after finish_outer_steps
  std::int64_t parameters = 0;
  std::vector<std::string> errors;
};

run_record run(const config::plan& plan, const train::train_options& options, int iterations,
               bool finish = false) {
  const int n = train::world_size(plan);
  run_record out;
  out.hashes.resize(n);
  out.losses.resize(n);
  out.channel_bytes.resize(n);
  out.payload_bytes.resize(n);
  out.finished_hashes.resize(n);
  out.errors = testing::run_rank_threads(
      models::tiny_gpt_shape(), plan, options, [&](int r, train::stage_executor& exec) -> std::string {
        for (int it = 0; it < iterations; ++it) {
          auto tel = exec.run_iteration(it);
          if (!tel) return tel.error().to_string();
          out.hashes[r].push_back(exec.parameters_hash());
          out.losses[r].push_back(tel->loss);
        }
        out.channel_bytes[r] = exec.channel_bytes_sent();
        out.payload_bytes[r] = exec.outer_payload_bytes();
        if (finish) {
          if (auto st = exec.finish_outer_steps(iterations)) return st->to_string();
          out.finished_hashes[r] = exec.parameters_hash();
        }
        if (r == 0) out.parameters = exec.num_parameters();
        return {};
      });
  return out;
}

void check_no_errors(const run_record& got) {
  for (const auto& e : got.errors) CHECK_MESSAGE(e.empty(), e);
}

}  // namespace

TEST_CASE("DiLoCo: two regions train apart and hold the regions' mean right after each exchange") {
  const auto got = run(diloco_plan({"a", "b"}, 3), averaging(), 7);
  check_no_errors(got);
  REQUIRE(got.hashes[0].size() == 7);
  for (int it = 0; it < 7; ++it) {
    CAPTURE(it);
    const bool exchanged = (it + 1) % 3 == 0;
    CHECK((got.hashes[0][it] == got.hashes[1][it]) == exchanged);
    CHECK(std::isfinite(got.losses[0][it]));
  }
  // Each region's loss is its own replica's: they differ between exchanges.
  CHECK(got.losses[0][1] != got.losses[1][1]);
  // Only the exchanges crossed zones (the loss and norm reduce inside each region): 2 rings of
  // two zones, each member sending half the fp32 parameters twice.
  const auto fp32 = static_cast<std::uint64_t>(4 * got.parameters);
  for (int r = 0; r < 2; ++r) {
    CHECK(got.payload_bytes[r] == 2 * 4 * got.parameters);
    CHECK(got.channel_bytes[r] >= 2 * fp32 - 16);
    CHECK(got.channel_bytes[r] <= 2 * fp32 + 16);
  }
}

TEST_CASE("DiLoCo: a region's replicas agree every iteration, and follow their leader's exchange") {
  // Zone a holds replicas 0 and 1 (one region), zone b replica 2.
  const auto got = run(diloco_plan({"a", "a", "b"}, 2), averaging(), 4);
  check_no_errors(got);
  for (int it = 0; it < 4; ++it) {
    CAPTURE(it);
    CHECK(got.hashes[0][it] == got.hashes[1][it]);
    CHECK((got.hashes[0][it] == got.hashes[2][it]) == ((it + 1) % 2 == 0));
  }
  CHECK(got.payload_bytes[0] > 0);   // the leader of east
  CHECK(got.payload_bytes[1] == 0);  // its follower receives the mean inside the region
  CHECK(got.payload_bytes[2] > 0);   // the leader of west
}

TEST_CASE("DiLoCo: int8 exchanges a byte a value and a scale a block, and still agrees") {
  const auto got = run(diloco_plan({"a", "b"}, 2), averaging(config::delta_compression::int8), 4);
  check_no_errors(got);
  CHECK(got.hashes[0][1] == got.hashes[1][1]);
  CHECK(got.hashes[0][3] == got.hashes[1][3]);
  // An all-gather of two: each sends its packed pseudo-gradient once per exchange.
  const auto packed = static_cast<std::uint64_t>(train::detail::int8_bytes(got.parameters));
  for (int r = 0; r < 2; ++r) {
    CHECK(got.channel_bytes[r] >= 2 * packed);
    CHECK(got.channel_bytes[r] <= 2 * packed + 16);
    CHECK(got.channel_bytes[r] * 3 < 2 * static_cast<std::uint64_t>(4 * got.parameters));
  }
}

TEST_CASE("DiLoCo: overlapped fragments keep training (Nesterov outer step), and finish on one model") {
  auto o = testing::options_for(train::optimizer_kind::adamw);
  o.outer.across_regions = config::across_regions_mode::diloco;
  o.outer.fragments = 2;
  o.outer.overlap_steps = 1;
  const auto got = run(diloco_plan({"a", "b"}, 4), o, 11, true);
  check_no_errors(got);
  REQUIRE(got.losses[0].size() == 11);
  for (double l : got.losses[0]) CHECK(std::isfinite(l));
  CHECK(got.losses[0].back() < got.losses[0].front());
  // Fragment 0 of 2 goes after iterations 4 and 8, fragment 1 (shifted by H / 2) after 6
  // and 10, each applied an iteration later: the whole model twice, and nothing in flight.
  for (int r = 0; r < 2; ++r) CHECK(got.payload_bytes[r] == 2 * 4 * got.parameters);
  // Overlapped, the regions keep their own progress: they never hold the same weights.
  for (int it = 0; it < 11; ++it) CHECK(got.hashes[0][it] != got.hashes[1][it]);
  // Finished (the end of a job), both hold the same weights.
  CHECK(got.finished_hashes[0] == got.finished_hashes[1]);
}

namespace {

// Trains `plan` 4 iterations with checkpoints every 2 into `dir` (written by replica 0).
void train_with_checkpoints(const config::plan& plan, const train::train_options& base, const std::string& dir) {
  auto o = base;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 2;
  auto errors = testing::run_rank_threads(models::tiny_gpt_shape(), plan, o,
                                          [&](int, train::stage_executor& exec) -> std::string {
                                            for (int it = 0; it < 4; ++it)
                                              if (auto t = exec.run_iteration(it); !t) return t.error().to_string();
                                            if (auto st = exec.flush_checkpoints()) return st->to_string();
                                            return {};
                                          });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
}

// Every rank of `plan` restores checkpoint 4 of `dir` and finishes DiLoCo's exchanges there:
// whether each rank's weights moved.
std::vector<bool> moved_by_finishing(const config::plan& plan, const train::train_options& o, const std::string& dir) {
  std::vector<bool> moved(static_cast<std::size_t>(train::world_size(plan)));
  auto errors = testing::run_rank_threads(models::tiny_gpt_shape(), plan, o,
                                          [&](int r, train::stage_executor& exec) -> std::string {
                                            if (auto st = exec.restore(dir, 4)) return st->to_string();
                                            const auto before = exec.parameters_hash();
                                            if (auto st = exec.finish_outer_steps(4)) return st->to_string();
                                            moved[r] = exec.parameters_hash() != before;
                                            return {};
                                          });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  return moved;
}

}  // namespace

TEST_CASE("DiLoCo: checkpoints hold the outer state, and a restored job continues its outer step") {
  // Nesterov: the anchor and momentum restored from iteration 4 (the exchange was after 3)
  // pull the restored weights at once when the exchanges are finished; restored from a
  // synchronous plan's checkpoint, the outer step starts at the weights (nothing moves).
  auto o = testing::options_for(train::optimizer_kind::adamw);
  o.outer.across_regions = config::across_regions_mode::diloco;
  o.outer.overlap_steps = 0;
  testing::temp_dir dir;
  const auto diloco = diloco_plan({"a", "b"}, 3);
  train_with_checkpoints(diloco, o, dir.path("diloco"));
  CHECK(moved_by_finishing(diloco, o, dir.path("diloco")) == std::vector<bool>{true, true});
  auto synchronous = diloco;
  synchronous.local_sgd.reset();
  train_with_checkpoints(synchronous, o, dir.path("sync"));
  CHECK(moved_by_finishing(diloco, o, dir.path("sync")) == std::vector<bool>{false, false});
}

TEST_CASE("DiLoCo: int8 packing and fragments by layer") {
  std::mt19937 draw(3);
  std::normal_distribution<float> normal;
  std::vector<float> values(1000);
  for (auto& v : values) v = normal(draw);
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(train::detail::int8_bytes(1000)));
  CHECK(packed.size() == 4 * 4 + 1000);  // 4 blocks of 256: a scale each, a byte a value
  train::detail::encode_int8(values, packed.data());
  std::vector<float> decoded(1000, 0.0f);
  train::detail::add_decoded_int8(packed.data(), decoded);
  for (std::size_t b = 0; b < 4; ++b) {
    const std::size_t begin = b * 256, end = std::min<std::size_t>(1000, begin + 256);
    float largest = 0;
    for (std::size_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
    for (std::size_t i = begin; i < end; ++i)
      if (std::fabs(decoded[i] - values[i]) > largest / 127 / 2 + 1e-6f) {
        FAIL_CHECK("value " << i << ": " << values[i] << " decoded as " << decoded[i]);
        break;
      }
  }
  // Decoding adds: twice gives twice the values.
  train::detail::add_decoded_int8(packed.data(), decoded);
  CHECK(std::fabs(decoded[7] - 2 * values[7]) < 2 * 4.0f / 127);

  // Six layers of one parameter each, equal sizes: three fragments of two layers.
  const auto three = train::detail::fragments_by_layer({10, 10, 10, 10, 10, 10}, {0, 1, 2, 3, 4, 5}, 3);
  CHECK(three == std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}, {2, 4}, {4, 6}});
  // Two parameters in one layer stay together; more fragments than layers: one a layer.
  const auto capped = train::detail::fragments_by_layer({5, 5, 10}, {0, 0, 1}, 4);
  CHECK(capped == std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}, {2, 3}});
}

}  // namespace integration_local_sgd
#endif  // __has_include(<sailor/models/gpt.hpp>)
