#include "prediction_note.hpp"

#include <doctest/doctest.h>

using namespace sailor::actors;

namespace {

std::vector<iteration_record> run(const std::vector<double>& times) {
  std::vector<iteration_record> out;
  for (std::size_t k = 0; k < times.size(); ++k) {
    iteration_record r;
    r.iteration = static_cast<std::int64_t>(k);
    r.measured_s = times[k];
    out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("prediction status: the running plan's median against its prediction, warm-up left out") {
  // One plan from iteration 0: its first iteration (1.0 s of warm-up) is not a sample.
  auto s = prediction_of_run(0.05, 0, run({1.0, 0.06, 0.05, 0.07, 0.06}));
  CHECK(s.measured_s == doctest::Approx(0.06));
  CHECK(s.ratio == doctest::Approx(1.2));
  CHECK(s.before_s == 0);
  CHECK(prediction_text(s) ==
        "; predicted 0.0500 s per iteration, measured 0.0600 s (measured/predicted 1.20)");
  // Nothing measured yet, nothing predicted: nothing to say.
  CHECK(prediction_text(prediction_of_run(0, 0, {})).empty());
}

TEST_CASE("prediction status: the realised gain of the last re-plan, both plans measured") {
  // A straggler from iteration 3 (0.35 s), a re-plan that resumed at iteration 6.
  auto s = prediction_of_run(0.06, 6,
                             run({0.05, 0.05, 0.05, 0.35, 0.36, 0.34, 0.9, 0.05, 0.05, 0.06}));
  CHECK(s.before_s == doctest::Approx(0.35));  // the previous plan's last iterations
  CHECK(s.measured_s == doctest::Approx(0.05));
  CHECK(s.realised_gain == doctest::Approx(1 - 0.05 / 0.35));
  CHECK(prediction_text(s).find("last re-plan: 0.3500 -> 0.0500 s measured (realised gain +86%)") !=
        std::string::npos);
  // Absurd samples (zero, negative) are not medians' material.
  auto t = prediction_of_run(0.06, 0, run({0.1, 0.0, -1.0, 0.05}));
  CHECK(t.measured_s == doctest::Approx(0.05));
}
