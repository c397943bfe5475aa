#include "sailor/config/gpu.hpp"

#include <algorithm>

namespace sailor::config {

namespace {
constexpr std::uint64_t gib = 1024ull * 1024 * 1024;
}

// Peak figures are the vendors' dense (no sparsity) datasheet numbers. Memory sizes of the
// types Sailor uses are Sailor's (basic_cluster_config.json), which are what the allocator
// sees. On-demand prices of A100-40, V100-16 and GH-96 are Sailor's; the others are GCP list
// prices per GPU (VM share included) as of 2025, and spot prices GCP's spot list prices.
// Consumer cards are not rented by the big clouds; their prices are marketplace medians and
// are marked so.
gpu_catalog gpu_catalog::builtin() {
  return gpu_catalog({
    {"A100-40", 312, 19.5, 42338615296ull, 1555, 4, 300, 12.5, 3.673, 1.15,
     "NVIDIA A100 datasheet (SXM4); memory, GPUs/node and on-demand price from Sailor; spot: GCP a2-highgpu list"},
    {"A100-80", 312, 19.5, 85899345920ull, 2039, 4, 300, 12.5, 5.07, 1.57,
     "NVIDIA A100 datasheet (SXM4 80GB); memory from Sailor; prices: GCP a2-ultragpu list"},
    {"V100-16", 125, 15.7, 17179869184ull, 900, 4, 150, 4.0, 2.86, 0.99,
     "NVIDIA V100 datasheet (SXM2); memory, GPUs/node and on-demand price from Sailor; spot: GCP n1+V100 list"},
    {"H100-80", 989, 67, 80 * gib, 3350, 8, 450, 25.0, 11.03, 3.72,
     "NVIDIA H100 datasheet (SXM5); prices: GCP a3-highgpu-8g list per GPU"},
    {"GH-96", 989, 67, 102625181696ull, 4000, 4, 150, 25.0, 11.06, 11.06,
     "NVIDIA GH200 datasheet; memory and price from Sailor (Clariden nodes, 4 per node); no spot market: spot = on-demand"},
    {"T4", 65, 8.1, 16 * gib, 320, 4, 16, 4.0, 0.35, 0.11,
     "NVIDIA T4 datasheet; prices: GCP list"},
    {"L4", 121, 30.3, 24 * gib, 300, 8, 32, 12.5, 0.71, 0.22,
     "NVIDIA L4 datasheet; prices: GCP g2 list per GPU"},
    {"RTX-2080", 53.8, 13.4, 11811160064ull, 616, 8, 16, 1.25, 0.25, 0.12,
     "NVIDIA RTX 2080 Ti (FP16 with FP32 accumulate); memory from Sailor; prices: marketplace median estimate"},
    {"RTX-3090", 71, 35.6, 25769803776ull, 936, 8, 32, 1.25, 0.30, 0.15,
     "NVIDIA RTX 3090 (FP16 with FP32 accumulate); memory from Sailor; prices: marketplace median estimate"},
    {"Titan-RTX", 130, 16.3, 25769803776ull, 672, 8, 16, 1.25, 0.30, 0.15,
     "NVIDIA Titan RTX datasheet; memory from Sailor; prices: marketplace median estimate"},
  });
}

const gpu_spec* gpu_catalog::find(std::string_view name) const {
  auto it = std::find_if(gpus_.begin(), gpus_.end(),
                         [name](const gpu_spec& g) { return g.name == name; });
  return it == gpus_.end() ? nullptr : &*it;
}

void gpu_catalog::upsert(gpu_spec spec) {
  for (auto& g : gpus_) {
    if (g.name == spec.name) {
      g = std::move(spec);
      return;
    }
  }
  gpus_.push_back(std::move(spec));
}

}  // namespace sailor::config
