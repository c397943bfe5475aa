// Every block family (GPT-2, OPT, Llama) trains to the single-process loss curve under any
// plan: DP, PP, TP (Llama's KV heads split over the TP ranks), mixed TP per stage and per
// replica, uneven PP and recomputation. Ranks run as threads meeting through an in-memory
// Gloo store; the tiny models train 12 iterations.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include "rank_threads.hpp"
#include "tiny_plans.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_families {

namespace {

using namespace sailor;
using sailor::testing::make_plan;
using sailor::testing::stage;

constexpr int iterations = 12;

config::model_shape shape_of(const std::string& family) {
  if (family == "opt") return models::tiny_opt_shape();
  if (family == "llama") return models::tiny_llama_shape();
  auto gpt = models::tiny_gpt_shape();
  gpt.tied_embeddings = family == "gpt2-tied";
  return gpt;
}

// Rank 0's loss curve; every rank's must match it (checked here).
std::vector<double> curve(const std::string& family, const config::plan& plan) {
  const int n = train::world_size(plan);
  std::vector<std::vector<double>> losses(n);
  auto errors = sailor::testing::run_rank_threads(
      shape_of(family), plan, sailor::testing::options_for(train::optimizer_kind::adamw),
      [&](int r, train::stage_executor& exec) -> std::string {
        for (int it = 0; it < iterations; ++it) {
          auto tel = exec.run_iteration(it);
          if (!tel) return tel.error().to_string();
          losses[r].push_back(tel->loss);
        }
        return {};
      });
  for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
  for (int r = 1; r < n; ++r) CHECK(losses[r] == losses[0]);
  return losses[0];
}

const std::vector<double>& reference(const std::string& family) {
  static std::map<std::string, std::vector<double>> cache;
  auto it = cache.find(family);
  if (it == cache.end()) it = cache.emplace(family, curve(family, make_plan({stage(0, 6, {1})}))).first;
  return it->second;
}

// The largest relative difference from the single-process curve (reported, and held to 1e-4).
void check_plan(const config::plan& plan, const char* what) {
  for (std::string family : {"gpt2", "opt", "llama"}) {
    CAPTURE(family);
    const auto& want = reference(family);
    auto got = curve(family, plan);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
    MESSAGE((family + " " + what + ": largest relative loss difference " + std::to_string(worst)));
    CHECK(worst < 1e-4);
  }
}

}  // namespace

TEST_CASE("families: each single-process model learns the synthetic data") {
  for (const char* family : {"gpt2", "opt", "llama"}) {
    CAPTURE(family);
    const auto& ref = reference(family);
    REQUIRE(ref.size() == iterations);
    CHECK(ref.front() == doctest::Approx(std::log(64.0)).epsilon(0.05));
    CHECK(ref.back() < ref.front() - 0.3);
  }
  // The families are different models: their curves differ.
  CHECK(reference("opt") != reference("gpt2"));
  CHECK(reference("llama") != reference("gpt2"));
}

TEST_CASE("families: DP=2") { check_plan(make_plan({stage(0, 6, {1, 1})}), "DP=2"); }
TEST_CASE("families: PP=3 with uneven layers") {
  check_plan(make_plan({stage(0, 2, {1}), stage(2, 3, {1}), stage(5, 1, {1})}), "PP=3 uneven");
}
TEST_CASE("families: TP=2") { check_plan(make_plan({stage(0, 6, {2})}), "TP=2"); }
TEST_CASE("families: TP 2 on one stage and 1 on the other, recomputed") {
  auto plan = make_plan({stage(0, 3, {2}), stage(3, 3, {1})});
  plan.stages[0].recompute = true;
  check_plan(plan, "PP=2 TP 2/1 recompute");
}
TEST_CASE("families: DP=2 with replicas of TP 1 and TP 2") {
  check_plan(make_plan({stage(0, 6, {1, 2})}), "DP=2 TP 1+2");
}

// The embedding on stage 0 and the head's copy on the last stage sum their gradients (a world
// all-reduce after the data-parallel one) and stay equal, whatever the TP degrees.
TEST_CASE("families: a head tied across pipeline stages") {
  const auto& want = reference("gpt2-tied");
  CHECK(want != reference("gpt2"));
  for (const auto& plan : {make_plan({stage(0, 3, {1, 1}), stage(3, 3, {2})}),
                           make_plan({stage(0, 2, {2}), stage(2, 3, {1}), stage(5, 1, {1, 2})})}) {
    auto got = curve("gpt2-tied", plan);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK_MESSAGE(std::abs(got[i] - want[i]) / want[i] < 1e-4, i << ": " << got[i] << " vs " << want[i]);
  }
}

TEST_CASE("families: options the runtime does not implement are refused, naming the field") {
  auto plan = make_plan({stage(0, 6, {1})});
  auto field_of = [&](const config::model_shape& m) {
    auto st = train::validate_for_training(m, plan);
    return st ? st->field : std::string();
  };
  auto llama = models::tiny_llama_shape();
  CHECK(field_of(llama).empty());
  auto learned = llama;
  learned.learned_positions = true;
  CHECK(field_of(learned) == "learned_positions");
  auto gated_gpt = models::tiny_gpt_shape();
  gated_gpt.gated_mlp = true;
  CHECK(field_of(gated_gpt) == "gated_mlp");
  auto gqa_opt = models::tiny_opt_shape();
  gqa_opt.kv_heads = 2;
  CHECK(field_of(gqa_opt) == "kv_heads");
  auto biased = llama;
  biased.bias = true;
  CHECK(field_of(biased) == "bias");
  // Llama's 2 KV heads cannot be split over 4 TP ranks.
  auto tp4 = train::validate_for_training(llama, make_plan({stage(0, 6, {4})}));
  REQUIRE(tp4);
  CHECK(tp4->field == "stages[0].replicas[0].tp");
}

}  // namespace integration_train_families
#endif  // __has_include(<sailor/models/shapes.hpp>)
