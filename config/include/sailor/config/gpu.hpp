#pragma once
/// The GPU catalog: what each GPU type can do and what it costs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sailor::config {

struct gpu_spec {
  std::string name;                 ///< Sailor's spelling: A100-40, V100-16, GH-96, ...
  double peak_fp16_tflops = 0;      ///< dense tensor-core FP16/BF16 peak
  double peak_fp32_tflops = 0;      ///< dense FP32 (non-tensor-core) peak
  std::uint64_t memory_bytes = 0;   ///< usable device memory
  double memory_bandwidth_gbytes_per_s = 0;
  int gpus_per_node = 1;            ///< GPUs in one node as clouds rent them
  double intra_node_gbytes_per_s = 0;   ///< per-GPU bandwidth of NVLink/PCIe inside a node
  double inter_node_gbytes_per_s = 0;   ///< per-node NIC bandwidth inside a zone
  double on_demand_usd_per_hour = 0;    ///< per GPU
  double spot_usd_per_hour = 0;         ///< per GPU
  std::string source;               ///< where the figures come from
};

class gpu_catalog {
public:
  gpu_catalog() = default;
  explicit gpu_catalog(std::vector<gpu_spec> gpus) : gpus_(std::move(gpus)) {}

  /// The built-in catalog (A100-40, A100-80, V100-16, H100-80, GH-96, T4, L4, RTX-2080,
  /// RTX-3090, Titan-RTX).
  static gpu_catalog builtin();

  const gpu_spec* find(std::string_view name) const;
  /// Adds a type or replaces the one of the same name.
  void upsert(gpu_spec spec);
  const std::vector<gpu_spec>& gpus() const { return gpus_; }

private:
  std::vector<gpu_spec> gpus_;
};

}  // namespace sailor::config
