// Data-parallel groups whose replicas all have one TP degree reduce their gradients in place,
// in buckets of the flat gradient buffer (executor.cpp): such plans train to the loss curve of
// one process, as every other plan does (train_equivalence.test.cpp covers the others).
// Ranks run as threads of this process and meet through an in-memory Gloo store.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/actors/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <latch>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace sailor;
using namespace std::chrono_literals;

config::replica rep(int tp) {
  config::replica r;
  r.gpu_type = "cpu";
  r.tp = tp;
  return r;
}

config::stage_plan stage(int first, int count, std::vector<int> tps) {
  config::stage_plan s;
  s.first_layer = first;
  s.num_layers = count;
  for (int tp : tps) s.replicas.push_back(rep(tp));
  return s;
}

config::plan make_plan(std::vector<config::stage_plan> stages) {
  config::plan p;
  p.micro_batch = 2;
  p.global_batch = 8;
  p.stages = std::move(stages);
  return p;
}

train::train_options options_for(train::optimizer_kind kind) {
  train::train_options o;
  o.seed = 7;
  o.optimizer = kind;
  o.learning_rate = kind == train::optimizer_kind::adamw ? 3e-3 : 0.5;
  o.momentum = kind == train::optimizer_kind::sgd ? 0.9 : 0.0;
  o.weight_decay = 0.01;
  o.clip_norm = 1.0;
  o.torch_threads = 1;
  o.timeout = 30s;
  return o;
}

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
  comm::gloo_options gopts;
  gopts.in_process_store = comm::make_in_process_store();
  gopts.timeout = 30s;
  run_result out;
  out.all.resize(n);
  out.last.resize(n);
  out.errors.resize(n);
  out.parameters.resize(n);
  // No rank tears its communicators down before every rank is done with them: a rank that
  // finishes early (e.g. with 0 iterations) would break the others' Gloo connections.
  std::latch finished(n);
  struct arrive_on_exit {
    std::latch& latch;
    ~arrive_on_exit() { latch.arrive_and_wait(); }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::communicator_factory> factory;  // destroyed after the guard
      std::unique_ptr<train::stage_executor> exec;
      arrive_on_exit guard{finished};
      auto made_factory = comm::make_gloo_factory(r, gopts);
      if (!made_factory) {
        out.errors[r] = made_factory.error().to_string();
        return;
      }
      factory = std::move(*made_factory);
      auto made_exec = train::stage_executor::create(model, plan, train::role_of(plan, r), *factory,
                                                     options_for(kind));
      if (!made_exec) {
        out.errors[r] = made_exec.error().to_string();
        return;
      }
      exec = std::move(*made_exec);
      out.parameters[r] = exec->num_parameters();
      for (int it = 0; it < iterations; ++it) {
        auto tel = exec->run_iteration(it);
        if (!tel) {
          out.errors[r] = tel.error().to_string();
          return;
        }
        out.all[r].push_back(tel->loss);
        out.last[r] = *tel;
      }
    });
  }
  for (auto& t : threads) t.join();
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

#endif
