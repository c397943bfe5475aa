// Every plan trains the tiny GPT to the same loss curve as one process does: ranks run as
// threads of this process and meet through an in-memory Gloo store on 127.0.0.1.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include "rank_threads.hpp"
#include "tiny_plans.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_equivalence {

namespace {

using namespace sailor;
using namespace std::chrono_literals;
using namespace sailor::testing;

struct run_result {
  std::vector<double> losses;              // rank 0's view
  std::vector<std::vector<double>> all;    // every rank's losses
  std::vector<train::iteration_telemetry> last;  // every rank's last telemetry
  std::vector<std::string> errors;
  std::vector<std::int64_t> parameters;  // every rank's
};

run_result train_plan(const config::plan& plan, int iterations,
                 train::optimizer_kind kind = train::optimizer_kind::adamw) {
  auto model = models::tiny_gpt_shape();
  const int n = train::world_size(plan);
  run_result out;
  out.all.resize(n);
  out.last.resize(n);
  out.parameters.resize(n);
  out.errors = sailor::testing::run_rank_threads(
    model, plan, options_for(kind), [&](int r, train::stage_executor& exec) -> std::string {
      out.parameters[r] = exec.num_parameters();
      for (int it = 0; it < iterations; ++it) {
        auto tel = exec.run_iteration(it);
        if (!tel)
          return tel.error().to_string();
        out.all[r].push_back(tel->loss);
        out.last[r] = *tel;
      }
      return {};
    });
  out.losses = out.all[0];
  return out;
}

const run_result& reference(train::optimizer_kind kind = train::optimizer_kind::adamw) {
  if (kind == train::optimizer_kind::adamw) {
    static run_result adamw = train_plan(make_plan({stage(0, 6, {1})}), 20);
    return adamw;
  }
  static run_result sgd = train_plan(make_plan({stage(0, 6, {1})}), 20, train::optimizer_kind::sgd);
  return sgd;
}

void check_same_curve(const run_result& got, const run_result& want) {
  for (const auto& e : got.errors) CHECK_MESSAGE(e.empty(), e);
  REQUIRE(got.losses.size() == want.losses.size());
  for (std::size_t r = 0; r < got.all.size(); ++r)
    CHECK(got.all[r] == got.losses);  // every rank reports the same loss
  for (std::size_t i = 0; i < want.losses.size(); ++i) {
    double rel = std::abs(got.losses[i] - want.losses[i]) / std::abs(want.losses[i]);
    CHECK_MESSAGE(rel < 1e-4, "iteration " << i << ": " << got.losses[i] << " vs "
                                            << want.losses[i]);
  }
}

}  // namespace

TEST_CASE("train: single-process reference learns the synthetic data") {
  const auto& ref = reference();
  for (const auto& e : ref.errors) CHECK_MESSAGE(e.empty(), e);
  REQUIRE(ref.losses.size() == 20);
  CHECK(ref.losses.front() == doctest::Approx(std::log(64.0)).epsilon(0.05));
  CHECK(ref.losses.back() < ref.losses.front() - 0.5);
}

TEST_CASE("train: DP=2 reproduces the single-process loss curve") {
  check_same_curve(train_plan(make_plan({stage(0, 6, {1, 1})}), 20), reference());
}

TEST_CASE("train: PP=2 reproduces the single-process loss curve") {
  check_same_curve(train_plan(make_plan({stage(0, 3, {1}), stage(3, 3, {1})}), 20), reference());
}

TEST_CASE("train: TP=2 reproduces the single-process loss curve") {
  check_same_curve(train_plan(make_plan({stage(0, 6, {2})}), 20), reference());
}

TEST_CASE("train: PP=2 with TP 2 on one stage and 1 on the other") {
  check_same_curve(train_plan(make_plan({stage(0, 3, {2}), stage(3, 3, {1})}), 20), reference());
}

TEST_CASE("train: DP=2 with one replica of TP 1 and one of TP 2") {
  check_same_curve(train_plan(make_plan({stage(0, 6, {1, 2})}), 20), reference());
}

TEST_CASE("train: PP=3 with uneven layers") {
  check_same_curve(train_plan(make_plan({stage(0, 2, {1}), stage(2, 3, {1}), stage(5, 1, {1})}), 20),
                   reference());
}

TEST_CASE("train: activation recomputation does not change the loss curve") {
  auto plan = make_plan({stage(0, 3, {2}), stage(3, 3, {1})});
  plan.stages[0].recompute = true;
  plan.stages[1].recompute = true;
  check_same_curve(train_plan(plan, 20), reference());
}

TEST_CASE("train: stages with different replica counts") {
  check_same_curve(train_plan(make_plan({stage(0, 2, {1, 1}), stage(2, 4, {1})}), 20), reference());
}

TEST_CASE("train: SGD under DP=2 x PP=2 reproduces the single-process SGD curve") {
  auto sgd = train_plan(make_plan({stage(0, 3, {1, 1}), stage(3, 3, {1, 1})}), 20,
                   train::optimizer_kind::sgd);
  check_same_curve(sgd, reference(train::optimizer_kind::sgd));
}

// Data-parallel groups whose replicas all have one TP degree reduce their gradients in place
// in the flat gradient buffer (executor.cpp), shards included; mixed TP degrees go slice by slice.
TEST_CASE("train: DP=2 of TP-2 replicas (in-place buckets of shards) reproduces the single-process curve") {
  check_same_curve(train_plan(make_plan({stage(0, 6, {2, 2})}), 20), reference());
}

TEST_CASE("train: PP=2 with DP=2 on each stage, TP 1 on one and TP 2 on the other") {
  check_same_curve(train_plan(make_plan({stage(0, 3, {1, 1}), stage(3, 3, {2, 2})}), 20), reference());
}

TEST_CASE("train: SGD under DP=2 of TP-2 replicas reproduces the single-process SGD curve") {
  check_same_curve(train_plan(make_plan({stage(0, 6, {2, 2})}), 20, train::optimizer_kind::sgd),
                   reference(train::optimizer_kind::sgd));
}

TEST_CASE("train: the stages of a plan hold the model's parameters") {
  auto model = models::tiny_gpt_shape();
  auto pp3 = train_plan(make_plan({stage(0, 2, {1}), stage(2, 3, {1}), stage(5, 1, {1})}), 0);
  for (const auto& e : pp3.errors) CHECK_MESSAGE(e.empty(), e);
  std::int64_t sum = 0;
  for (auto n : pp3.parameters) sum += n;
  CHECK(sum == model.total_params());
  // TP 2: sharded matrices split, layer norms, row-parallel biases and positions repeated.
  auto tp2 = train_plan(make_plan({stage(0, 6, {2})}), 0);
  REQUIRE(tp2.parameters.size() == 2);
  const std::int64_t h = model.hidden;
  std::int64_t replicated = model.sequence * h + model.num_layers * (4 * h + 2 * h) + 2 * h;
  CHECK(tp2.parameters[0] == tp2.parameters[1]);
  CHECK(tp2.parameters[0] + tp2.parameters[1] == model.total_params() + replicated);
}

TEST_CASE("train: telemetry accounts for the iteration") {
  auto got = train_plan(make_plan({stage(0, 3, {1}), stage(3, 3, {2})}), 2);
  for (const auto& e : got.errors) CHECK_MESSAGE(e.empty(), e);
  for (std::size_t r = 0; r < got.last.size(); ++r) {
    const auto& t = got.last[r];
    CHECK(t.iteration == 1);
    CHECK(t.micro_batches == 4);
    CHECK(t.tokens == 8 * 16);
    CHECK(t.compute_s > 0);
    CHECK(t.total_s >= t.compute_s + t.recv_wait_s + t.send_wait_s);
  }
  CHECK(got.last[1].all_reduce_s > 0);  // stage 1 runs TP all-reduces
  CHECK(got.last[1].recv_wait_s > 0);   // and waits for stage 0's activations
}

TEST_CASE("train: state saved after 3 iterations resumes to the same losses") {
  auto model = models::tiny_gpt_shape();
  auto plan = make_plan({stage(0, 6, {1})});
  comm::gloo_options gopts;
  gopts.in_process_store = comm::make_in_process_store();
  auto factory = comm::make_gloo_factory(0, gopts);
  REQUIRE(factory.ok());
  auto a = train::stage_executor::create(model, plan, {0, 0, 0}, **factory, options_for(train::optimizer_kind::adamw));
  REQUIRE(a.ok());
  for (int it = 0; it < 3; ++it) REQUIRE((*a)->run_iteration(it).ok());
  auto saved = (*a)->save_state();
  REQUIRE(saved.ok());
  std::vector<double> want;
  for (int it = 3; it < 5; ++it) want.push_back((*a)->run_iteration(it)->loss);

  gopts.prefix = "resumed";
  auto factory2 = comm::make_gloo_factory(0, gopts);
  REQUIRE(factory2.ok());
  auto b = train::stage_executor::create(model, plan, {0, 0, 0}, **factory2, options_for(train::optimizer_kind::adamw));
  REQUIRE(b.ok());
  CHECK((*b)->run_iteration(3)->loss != want[0]);  // fresh weights differ
  REQUIRE_FALSE((*b)->load_state(*saved));
  std::vector<double> got;
  for (int it = 3; it < 5; ++it) got.push_back((*b)->run_iteration(it)->loss);
  CHECK(got == want);
}

TEST_CASE("train: invalid plans are rejected with the field named") {
  auto model = models::tiny_gpt_shape();
  auto gap = make_plan({stage(0, 2, {1}), stage(3, 3, {1})});
  auto st = train::validate_for_training(model, gap);
  REQUIRE(st.has_value());
  CHECK(st->field == "stages[1].first_layer");
  auto tp3 = make_plan({stage(0, 6, {3})});
  st = train::validate_for_training(model, tp3);
  REQUIRE(st.has_value());
  CHECK(st->field == "stages[0].replicas[0].tp");
  CHECK_FALSE(train::validate_for_training(model, make_plan({stage(0, 6, {1, 2})})));
}

}  // namespace integration_train_equivalence
#endif  // __has_include(<sailor/models/shapes.hpp>)
