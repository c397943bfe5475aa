// Checkpoints written by one plan restore into another: training continues from the last
// completed iteration with the loss curve of uninterrupted single-process training. Ranks run
// as threads of this process and meet through an in-memory Gloo store on 127.0.0.1.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/checkpoint.hpp>
#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "rank_threads.hpp"
#include "tiny_plans.hpp"
#include "temp_file.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_resume {

namespace {

using namespace sailor;
using sailor::testing::make_plan;
using sailor::testing::stage;
namespace fs = std::filesystem;

train::train_options options_for(train::optimizer_kind kind, const std::string& dir = "",
                                 int every = 1) {
  auto o = sailor::testing::options_for(kind);
  o.checkpoint_dir = dir;
  o.checkpoint_every = every;
  return o;
}

struct run_result {
  std::vector<double> losses;  // rank 0's, one per iteration run
  std::vector<std::string> errors;
  std::vector<error_kind> restore_kinds;  // of a failed restore, per rank
  std::vector<double> checkpoint_s;  // rank 0's telemetry
};

// Runs every rank of `plan` as a thread: create, restore(dir, first) when first > 0, run
// iterations [first, end), flush the checkpoints.
run_result run_plan(const config::plan& plan, const train::train_options& options, int first,
                    int end, const config::model_shape& model = models::tiny_gpt_shape()) {
  const int n = train::world_size(plan);
  run_result out;
  out.restore_kinds.resize(n, error_kind::failed);
  std::vector<std::vector<double>> losses(n);
  std::vector<std::vector<double>> ckpt(n);
  out.errors = sailor::testing::run_rank_threads(
    model, plan, options, [&](int r, train::stage_executor& exec) -> std::string {
      if (first > 0) {
        if (auto st = exec.restore(options.checkpoint_dir, first)) {
          out.restore_kinds[r] = st->kind;
          return st->to_string();
        }
      }
      for (int it = first; it < end; ++it) {
        auto tel = exec.run_iteration(it);
        if (!tel)
          return tel.error().to_string();
        losses[r].push_back(tel->loss);
        ckpt[r].push_back(tel->checkpoint_s);
      }
      if (auto st = exec.flush_checkpoints())
        return st->to_string();
      return {};
    });
  out.losses = losses[0];
  out.checkpoint_s = ckpt[0];
  return out;
}

const std::vector<double>& reference(train::optimizer_kind kind) {
  static const auto adamw =
      run_plan(make_plan({stage(0, 6, {1})}), options_for(train::optimizer_kind::adamw), 0, 10).losses;
  static const auto sgd =
      run_plan(make_plan({stage(0, 6, {1})}), options_for(train::optimizer_kind::sgd), 0, 10).losses;
  return kind == train::optimizer_kind::adamw ? adamw : sgd;
}

void check_no_errors(const run_result& r) {
  for (const auto& e : r.errors) CHECK_MESSAGE(e.empty(), e);
}

// Plan `a` trains 5 iterations with checkpoints, plan `b` restores them and trains 5 more:
// the 10 losses are the single-process ones.
void check_transition(const config::plan& a, const config::plan& b, train::optimizer_kind kind,
                      int every = 5) {
  testing::temp_dir dir;
  const auto ckpt = (dir.root() / "ckpt").string();
  auto first = run_plan(a, options_for(kind, ckpt, every), 0, 5);
  check_no_errors(first);
  REQUIRE(train::latest_checkpoint(ckpt) == 5);
  auto second = run_plan(b, options_for(kind, ckpt, every), 5, 10);
  check_no_errors(second);
  std::vector<double> got = first.losses;
  got.insert(got.end(), second.losses.begin(), second.losses.end());
  const auto& want = reference(kind);
  REQUIRE(want.size() == 10);
  REQUIRE(got.size() == 10);
  for (std::size_t i = 0; i < want.size(); ++i) {
    double rel = std::abs(got[i] - want[i]) / std::abs(want[i]);
    CHECK_MESSAGE(rel < 1e-4, "iteration " << i << ": " << got[i] << " vs " << want[i]);
  }
}

}  // namespace

TEST_CASE("train resume: the reference learns, so a fresh start at iteration 5 would differ") {
  const auto& want = reference(train::optimizer_kind::adamw);
  REQUIRE(want.size() == 10);
  CHECK(want[5] < want[0] - 0.1);
  // Without a restore, plan B at iteration 5 starts from the initial weights.
  auto fresh = run_plan(make_plan({stage(0, 6, {1})}), options_for(train::optimizer_kind::adamw), 0, 1);
  check_no_errors(fresh);
  CHECK(std::abs(fresh.losses[0] - want[5]) > 0.1);
}

TEST_CASE("train resume: PP=2 -> single process (AdamW)") {
  check_transition(make_plan({stage(0, 3, {1}), stage(3, 3, {1})}), make_plan({stage(0, 6, {1})}),
                   train::optimizer_kind::adamw);
}

TEST_CASE("train resume: DP=2 -> PP=2 with TP 2 on one stage (AdamW)") {
  check_transition(make_plan({stage(0, 6, {1, 1})}),
                   make_plan({stage(0, 3, {2}), stage(3, 3, {1})}), train::optimizer_kind::adamw);
}

TEST_CASE("train resume: TP=2 -> DP=2 with a TP 1 and a TP 2 replica (AdamW)") {
  check_transition(make_plan({stage(0, 6, {2})}), make_plan({stage(0, 6, {1, 2})}),
                   train::optimizer_kind::adamw, 1);
}

TEST_CASE("train resume: PP=3 uneven -> PP=2 (AdamW)") {
  check_transition(make_plan({stage(0, 2, {1}), stage(2, 3, {1}), stage(5, 1, {1})}),
                   make_plan({stage(0, 3, {1}), stage(3, 3, {1})}), train::optimizer_kind::adamw);
}

TEST_CASE("train resume: DP=2 x PP=2 -> TP=2 (SGD with momentum)") {
  check_transition(make_plan({stage(0, 3, {1, 1}), stage(3, 3, {1, 1})}),
                   make_plan({stage(0, 2, {2}), stage(2, 4, {1})}), train::optimizer_kind::sgd);
}

TEST_CASE("train resume: checkpoints are pruned to the last 3 and incomplete ones skipped") {
  testing::temp_dir dir;
  const auto ckpt = (dir.root() / "ckpt").string();
  CHECK(train::latest_checkpoint(ckpt) == 0);  // no folder yet
  auto plan = make_plan({stage(0, 3, {2}), stage(3, 3, {1})});
  auto r = run_plan(plan, options_for(train::optimizer_kind::adamw, ckpt, 1), 0, 4);
  check_no_errors(r);
  REQUIRE(r.checkpoint_s.size() == 4);
  for (double s : r.checkpoint_s) CHECK(s > 0);  // every iteration took one
  CHECK(train::latest_checkpoint(ckpt) == 4);
  CHECK(fs::is_directory(train::checkpoint_path(ckpt, 2)));
  CHECK(fs::is_directory(train::checkpoint_path(ckpt, 3)));
  CHECK(fs::is_directory(train::checkpoint_path(ckpt, 4)));
  CHECK_FALSE(fs::exists(train::checkpoint_path(ckpt, 1)));

  // Three writers (TP 2 on stage 0, TP 1 on stage 1): drop one file of checkpoint 4.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(train::checkpoint_path(ckpt, 4))) files.push_back(e.path());
  REQUIRE(files.size() == 3);
  // A writer killed mid-write leaves only its temporary file.
  fs::rename(files[1], files[1].parent_path() / ("." + files[1].filename().string() + ".tmp"));
  CHECK(train::latest_checkpoint(ckpt) == 3);

  auto resumed = run_plan(make_plan({stage(0, 6, {1})}),
                          options_for(train::optimizer_kind::adamw, ckpt, 100), 4, 5);
  REQUIRE(resumed.errors.size() == 1);
  CHECK(resumed.restore_kinds[0] == error_kind::invalid_input);
  CHECK(resumed.errors[0].find("incomplete") != std::string::npos);
  CHECK(resumed.errors[0].find(train::checkpoint_path(ckpt, 4)) != std::string::npos);

  auto from3 = run_plan(make_plan({stage(0, 6, {1})}),
                        options_for(train::optimizer_kind::adamw, ckpt, 100), 3, 4);
  check_no_errors(from3);
  REQUIRE(from3.losses.size() == 1);
  CHECK(std::abs(from3.losses[0] - reference(train::optimizer_kind::adamw)[3]) /
            reference(train::optimizer_kind::adamw)[3] < 1e-4);
}

TEST_CASE("train resume: a missing checkpoint, another model or another optimizer is refused") {
  testing::temp_dir dir;
  const auto ckpt = (dir.root() / "ckpt").string();
  auto single = make_plan({stage(0, 6, {1})});
  auto r = run_plan(single, options_for(train::optimizer_kind::adamw, ckpt, 2), 0, 2);
  check_no_errors(r);
  REQUIRE(train::latest_checkpoint(ckpt) == 2);

  auto missing = run_plan(single, options_for(train::optimizer_kind::adamw, ckpt), 7, 8);
  CHECK(missing.restore_kinds[0] == error_kind::invalid_input);
  CHECK(missing.errors[0].find(train::checkpoint_path(ckpt, 7)) != std::string::npos);
  CHECK(missing.errors[0].find("does not exist") != std::string::npos);

  auto other = models::tiny_gpt_shape();
  other.hidden = 48;
  auto shape = run_plan(single, options_for(train::optimizer_kind::adamw, ckpt), 2, 3, other);
  CHECK(shape.restore_kinds[0] == error_kind::invalid_input);
  CHECK(shape.errors[0].find("another model shape") != std::string::npos);
  CHECK(shape.errors[0].find("hidden 32 there, 48 here") != std::string::npos);
  CHECK(shape.errors[0].find(".ckpt") != std::string::npos);  // names the file

  auto sgd = run_plan(single, options_for(train::optimizer_kind::sgd, ckpt), 2, 3);
  CHECK(sgd.restore_kinds[0] == error_kind::invalid_input);
  CHECK(sgd.errors[0].find("adamw") != std::string::npos);
  CHECK(sgd.errors[0].find("sgd") != std::string::npos);

  // A file cut short (e.g. copied partially) is detected, with its name.
  fs::path victim;
  for (const auto& e : fs::directory_iterator(train::checkpoint_path(ckpt, 2))) victim = e.path();
  fs::resize_file(victim, fs::file_size(victim) - 100);
  auto cut = run_plan(single, options_for(train::optimizer_kind::adamw, ckpt), 2, 3);
  CHECK(cut.errors[0].find("truncated") != std::string::npos);
  CHECK(cut.errors[0].find(victim.filename().string()) != std::string::npos);
}

}  // namespace integration_train_resume
#endif  // __has_include(<sailor/models/shapes.hpp>)
