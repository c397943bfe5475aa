// Training on a user's data: the loss curve and the validation loss do not depend on the
// plan, the validation loss falls as the model learns the text, the learning-rate schedule
// is nanoGPT's, and data the model cannot read is refused before training.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include "rank_threads.hpp"
#include "temp_file.hpp"
#include "tiny_plans.hpp"
#include "word_corpus.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_data {

namespace {

using namespace sailor;
using sailor::testing::make_plan;
using sailor::testing::stage;

// About 20 kB of text over a few words, in a deterministic order with some structure to learn.
std::string corpus() { return sailor::testing::word_corpus(20000); }

struct curves {
  std::vector<double> train;
  std::vector<double> validation;  // before training, then after each 10 iterations
};

curves train_on(const config::plan& plan, const std::string& path, int iterations = 20) {
  auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  config::data_source data;
  data.path = path;
  options.data = data;
  options.eval_batches = 2;
  const int n = train::world_size(plan);
  std::vector<curves> out(n);
  auto errors = sailor::testing::run_rank_threads(
      models::tiny_gpt_shape(), plan, options, [&](int r, train::stage_executor& exec) -> std::string {
        for (int it = 0; it <= iterations; ++it) {
          if (it % 10 == 0) {
            auto v = exec.validation_loss();
            if (!v) return v.error().to_string();
            out[r].validation.push_back(*v);
          }
          if (it == iterations) break;
          auto tel = exec.run_iteration(it);
          if (!tel) return tel.error().to_string();
          out[r].train.push_back(tel->loss);
        }
        return {};
      });
  for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
  for (int r = 1; r < n; ++r) {
    CHECK(out[r].train == out[0].train);
    CHECK(out[r].validation == out[0].validation);
  }
  return out[0];
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) / want[i] < 1e-4, i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

TEST_CASE("data: training on a text file, the validation loss falls, and any plan gives the same curves") {
  sailor::testing::temp_dir dir;
  auto path = dir.write("corpus.txt", corpus());
  auto single = train_on(make_plan({stage(0, 6, {1})}), path);
  REQUIRE(single.validation.size() == 3);
  // 20 symbols: a uniform guess over the 64 ids costs log 64; the model learns the text.
  CHECK(single.validation.front() == doctest::Approx(std::log(64.0)).epsilon(0.05));
  CHECK(single.validation.back() < single.validation.front() - 1.0);
  auto split = train_on(make_plan({stage(0, 3, {1, 1}), stage(3, 3, {2})}), path);
  check_close(split.train, single.train);
  check_close(split.validation, single.validation);
}

TEST_CASE("data: a data file the model cannot read is refused when the executor is made") {
  sailor::testing::temp_dir dir;
  auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  config::data_source data;
  data.path = dir.write("wide.txt", std::string(30, 'a') + "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ" +
                                        "abcdefghijklmnopqrstuvwxyz!?.,;:");
  options.data = data;
  auto errors = sailor::testing::run_rank_threads(models::tiny_gpt_shape(), make_plan({stage(0, 6, {1})}),
                                                  options, [](int, train::stage_executor&) { return std::string(); });
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find(data.path) != std::string::npos);
  CHECK(errors[0].find("more than the model's vocabulary of 64") != std::string::npos);
}

TEST_CASE("data: without data there is no validation loss to compute") {
  auto errors = sailor::testing::run_rank_threads(
      models::tiny_gpt_shape(), make_plan({stage(0, 6, {1})}),
      sailor::testing::options_for(train::optimizer_kind::adamw), [](int, train::stage_executor& exec) {
        auto v = exec.validation_loss();
        return v ? std::string("a validation loss without data") : std::string();
      });
  CHECK(errors == std::vector<std::string>{""});
}

TEST_CASE("schedule: linear warm-up, cosine decay to the floor, then the floor") {
  train::train_options o;
  o.learning_rate = 1e-3;
  o.min_learning_rate = 1e-4;
  o.warmup_iterations = 100;
  o.decay_iterations = 2000;
  CHECK(train::learning_rate_at(o, 0) == doctest::Approx(1e-3 / 101));
  CHECK(train::learning_rate_at(o, 99) == doctest::Approx(1e-3 * 100 / 101));
  CHECK(train::learning_rate_at(o, 100) == doctest::Approx(1e-3));
  CHECK(train::learning_rate_at(o, 1050) == doctest::Approx(5.5e-4));
  CHECK(train::learning_rate_at(o, 2000) == doctest::Approx(1e-4));
  CHECK(train::learning_rate_at(o, 5000) == doctest::Approx(1e-4));
  train::train_options constant;
  constant.learning_rate = 3e-3;
  CHECK(train::learning_rate_at(constant, 0) == 3e-3);
  CHECK(train::learning_rate_at(constant, 100000) == 3e-3);
}

}  // namespace integration_train_data
#endif  // __has_include(<sailor/models/shapes.hpp>)
