#pragma once
// Training over emulated zones, shared by tests/train_shaping.test.cpp (what a link must
// hold) and bench/train_shaping (how closely it holds): stages whose replicas sit in named
// zones, a link between two zones, the tiny GPT trained with every rank a thread, each rank's
// telemetry per iteration, and medians over the iterations after the first (a median shrugs
// off an iteration another process slowed down).
// Needs LibTorch (include only from tests built with it).

#include <algorithm>
#include <string>
#include <vector>

#include <sailor/models/shapes.hpp>

#include "rank_threads.hpp"
#include "tiny_plans.hpp"

namespace sailor::testing {

/// Layers [first, first + count) on a CPU replica (TP 1) in `zone`, and a second one in
/// `second_zone` when given.
inline config::stage_plan zoned_stage(int first, int count, const std::string& zone,
                                      const std::string& second_zone = "") {
  auto s = stage(first, count, second_zone.empty() ? std::vector<int>{1} : std::vector<int>{1, 1});
  s.replicas[0].zone = zone;
  if (!second_zone.empty()) s.replicas[1].zone = second_zone;
  return s;
}

inline config::zone_link link_of(const std::string& a, const std::string& b, double latency_s,
                                 double gbytes_per_s) {
  config::zone_link l;
  l.from = a;
  l.to = b;
  l.latency_s = latency_s;
  l.bandwidth_gbytes_per_s = gbytes_per_s;
  return l;
}

/// What `link` adds to an iteration of the tiny GPT in one stage of two data-parallel
/// replicas, one each side of it: one hierarchical gradient all-reduce per layer and the loss
/// and norm all-reduce, each a ring of two zones: 2 steps over the link, each the latency and
/// half the buffer at the link's bandwidth (what the shaper holds those bytes).
inline double dp_link_all_reduce_s(const config::zone_link& link) {
  auto ring_of_two = [&](double bytes) {
    return 2 * (link.latency_s + bytes / 2 / (link.bandwidth_gbytes_per_s * 1e9));
  };
  const auto model = models::tiny_gpt_shape();
  double expected = ring_of_two(2 * 8.0);  // loss and norm
  for (int l = 0; l < model.num_all_layers(); ++l)
    expected += ring_of_two(4.0 * static_cast<double>(model.params_of_layer(l)));
  return expected;
}

struct zoned_run {
  std::vector<double> losses;                                      ///< rank 0's
  std::vector<std::vector<train::iteration_telemetry>> telemetry;  ///< [rank][iteration]
  std::vector<std::string> errors;                                 ///< one per rank, "" when none
};

/// The tiny GPT trained `iterations` iterations on `plan`, every rank a thread.
inline zoned_run train_zoned(const config::plan& plan, int iterations, const train::train_options& options) {
  zoned_run out;
  out.telemetry.resize(static_cast<std::size_t>(train::world_size(plan)));
  out.errors = run_rank_threads(
    models::tiny_gpt_shape(), plan, options, [&](int r, train::stage_executor& exec) -> std::string {
      for (int it = 0; it < iterations; ++it) {
        auto tel = exec.run_iteration(it);
        if (!tel) return tel.error().to_string();
        out.telemetry[static_cast<std::size_t>(r)].push_back(*tel);
      }
      return {};
    });
  for (const auto& t : out.telemetry[0]) out.losses.push_back(t.loss);
  return out;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The median over iterations 1.. (the first warms up) of `field` of rank `rank`'s telemetry.
template <class Field>
double median_after_first(const zoned_run& run, int rank, Field field) {
  const auto& t = run.telemetry[static_cast<std::size_t>(rank)];
  std::vector<double> v;
  for (std::size_t k = 1; k < t.size(); ++k) v.push_back(field(t[k]));
  return median(v);
}

}  // namespace sailor::testing
