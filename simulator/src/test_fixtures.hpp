#pragma once
// Shared by the simulator's unit tests: a small model with a profile, a two-zone cluster with
// a priced link, and plan builders.

#include <utility>
#include <vector>

#include "sailor/simulator/simulator.hpp"

namespace sailor::simulator::testing {


// A small model: 2 blocks (4 layers), sequence 128, hidden 64, 4 heads, vocabulary 1000.
inline config::model_shape tiny_model() {
  return {.name = "tiny", .num_layers = 2, .hidden = 64, .heads = 4,
          .sequence = 128, .vocabulary = 1000};
}

// GPU "fast": 1 ms forward and 2 ms backward per layer at mbs 1 and 2 (tp 1); "slow": twice that.
inline config::model_profile tiny_profile() {
  config::model_profile p;
  p.model = "tiny";
  for (auto [name, factor] : {std::pair<const char*, double>{"fast", 1.0}, {"slow", 2.0}}) {
    config::gpu_profile g;
    g.gpu_type = name;
    for (int mbs : {1, 2})
      g.times[mbs][1] = std::vector<config::layer_time>(4, config::layer_time{1e-3 * factor * mbs, 2e-3 * factor * mbs, 0});
    p.by_gpu[name] = g;
  }
  return p;
}

inline config::gpu_spec spec(const char* name, double mem_gb, double price) {
  config::gpu_spec s;
  s.name = name;
  s.peak_fp16_tflops = 100;
  s.memory_bytes = static_cast<std::uint64_t>(mem_gb * 1e9);
  s.memory_bandwidth_gbytes_per_s = 1000;
  s.gpus_per_node = 4;
  s.intra_node_gbytes_per_s = 100;
  s.inter_node_gbytes_per_s = 10;
  s.on_demand_usd_per_hour = price;
  return s;
}

// Two zones in two regions: a link of 1 ms and 1 GB/s, egress $0.02/GB.
inline config::cluster two_zones() {
  config::cluster c;
  c.name = "test";
  c.gpus = config::gpu_catalog({spec("fast", 10, 2.0), spec("slow", 10, 1.0)});
  c.regions = {{"r1", {"a"}}, {"r2", {"b"}}};
  c.zones = {{"a", "r1", {{"fast", 8}, {"slow", 8}}}, {"b", "r2", {{"fast", 8}}}};
  c.links.push_back({"a", "b", 1e-3, 1.0, std::nullopt, 0.02});
  c.defaults.same_zone = {"", "", 0.0, 100.0, std::nullopt, 0.0};
  return c;
}

struct fixture {
  config::model_shape model = tiny_model();
  config::model_profile profile = tiny_profile();
  config::cluster cluster = two_zones();
  config::data_parallel_options data_parallel;  ///< the job's (DiLoCo's exchange options)
  sim_context make(sim_options o = {}) {
    o.profile_layer_overhead_s = 0;
    o.framework_overhead_bytes = 0;
    o.activation_peak_factor = 1.0;
    sim_inputs in;
    in.model = model;
    in.profile = &profile;
    in.cluster = &cluster;
    in.job.optimizer = config::optimizer_kind::adam;
    in.job.mixed_precision = true;
    in.job.data_parallel = data_parallel;
    auto c = sim_context::make(in, o);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().to_string()));
    return std::move(*c);
  }
  /// The model with `blocks` blocks, its profile extended to as many layers (the blocks, the
  /// embedding and the head) with the times of layer 1.
  void set_blocks(int blocks) {
    model.num_layers = blocks;
    for (auto& [name, g] : profile.by_gpu)
      for (auto& [mbs, by_tp] : g.times)
        for (auto& [tp, v] : by_tp) v.resize(blocks + 2, v[1]);
  }
  /// Runs `check(ctx, async)` on a context without, then with, point-to-point transfers that
  /// overlap compute (sim_options::overlap_p2p): for what must hold either way.
  template <class Check>
  void with_and_without_overlap(Check check) {
    for (bool async : {false, true}) {
      sim_options o;
      o.overlap_p2p = async;
      check(make(o), async);
    }
  }
};

// The fixture with a context of the default options: for the tests that simulate it as it is.
struct with_context : fixture {
  sim_context ctx = make();
};

inline config::replica rep(const char* gpu, const char* zone, int tp = 1) {
  config::replica r;
  r.gpu_type = gpu;
  r.zone = zone;
  r.tp = tp;
  return r;
}

inline config::plan make_plan(int mbs, int gbs, std::vector<std::pair<int, std::vector<config::replica>>> stages) {
  config::plan p;
  p.micro_batch = mbs;
  p.global_batch = gbs;
  int first = 0;
  for (auto& [n, reps] : stages) {
    config::stage_plan s;
    s.first_layer = first;
    s.num_layers = n;
    s.replicas = reps;
    first += n;
    p.stages.push_back(s);
  }
  return p;
}

}  // namespace sailor::simulator::testing
