#pragma once
// Small synthetic problems for the planner's tests: a 6-layer model (embedding, 4 blocks, head),
// two GPU types (a fast A100-40 and a slow, small V100-16) and two zones of one region.

#include <cmath>
#include <string>

#include "sailor/planner/planner.hpp"

namespace sailor::planner::testing {

inline config::model_shape tiny_model() {
  return {.name = "tiny", .num_layers = 4, .hidden = 1024, .heads = 16,
          .sequence = 1024, .vocabulary = 32000};
}

/// Per-layer times: blocks cost `block` s per sequence at TP 1 (TP t: block / t^0.85);
/// the head costs twice a block, the embedding a tenth.
inline config::gpu_profile tiny_profile(const std::string& gpu, double block) {
  config::gpu_profile p;
  p.gpu_type = gpu;
  for (int b : {1, 2, 4}) {
    for (int t : {1, 2, 4}) {
      std::vector<config::layer_time> layers;
      for (int l = 0; l < 6; ++l) {
        double scale = l == 0 ? 0.1 : l == 5 ? 2.0 : 1.0;
        double f = block * scale * b / std::pow(double(t), 0.85) * (1 + 0.05 * (b == 1));
        layers.push_back({f, 2 * f, 0.002 * scale / t});
      }
      p.times[b][t] = layers;
    }
  }
  return p;
}

inline problem tiny_problem(int a100_a, int a100_b, int v100_a, int v100_b, int gbs = 32) {
  problem prob;
  prob.model = tiny_model();
  prob.profile.model = "tiny";
  prob.profile.by_gpu["A100-40"] = tiny_profile("A100-40", 0.010);
  prob.profile.by_gpu["V100-16"] = tiny_profile("V100-16", 0.024);
  // Sizes: 1.5 GB of parameters per block at TP 1 (24 GB of states: a block does not fit a
  // V100-16 without TP); activations 1 GB per block per sequence.
  for (int t : {1, 2, 4}) {
    std::vector<config::layer_size> sizes(6);
    for (int l = 0; l < 6; ++l) {
      double scale = l == 0 ? 0.5 : l == 5 ? 0.6 : 1.0;
      sizes[l].params_floats = 0.375e9 * scale / t;
      sizes[l].act_output_floats = 4e6;
      sizes[l].act_input_floats = 4e6;
      sizes[l].act_mem_floats = 0.25e9 * scale / t;
    }
    prob.profile.sizes_by_tp[t] = sizes;
  }
  prob.cluster.name = "tiny";
  prob.cluster.regions = {{"r1", {"r1-a", "r1-b"}}};
  prob.cluster.zones = {{"r1-a", "r1", {}}, {"r1-b", "r1", {}}};
  if (a100_a) prob.cluster.zones[0].gpus["A100-40"] = a100_a;
  if (v100_a) prob.cluster.zones[0].gpus["V100-16"] = v100_a;
  if (a100_b) prob.cluster.zones[1].gpus["A100-40"] = a100_b;
  if (v100_b) prob.cluster.zones[1].gpus["V100-16"] = v100_b;
  prob.job.global_batch = gbs;
  return prob;
}

}  // namespace sailor::planner::testing
