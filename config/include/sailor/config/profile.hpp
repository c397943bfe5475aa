#pragma once
/// Measured per-layer profiles (from Sailor's profiles or our own `sailor profile`).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::config {

/// Times of one layer for one micro-batch, seconds. TP communication inside a node included.
struct layer_time {
  double forward_s = 0;
  double backward_s = 0;
  double update_s = 0;  ///< optimizer step of this layer's parameters
};

/// One GPU type's profile of one model: micro_batch -> tp -> per-layer times.
struct gpu_profile {
  std::string gpu_type;
  std::map<int, std::map<int, std::vector<layer_time>>> times;

  const std::vector<layer_time>* find(int micro_batch, int tp) const;
};

/// Per-layer sizes at micro-batch 1 (Sailor's llm_info), floats (4 bytes each).
struct layer_size {
  double params_floats = 0;
  double act_output_floats = 0;
  double act_input_floats = 0;
  double act_mem_floats = 0;  ///< growth of allocated memory during the layer's forward
};

/// Everything measured about one model: time profiles per GPU type, sizes per TP degree.
struct model_profile {
  std::string model;
  std::map<std::string, gpu_profile> by_gpu;
  std::map<int, std::vector<layer_size>> sizes_by_tp;

  const gpu_profile* find(const std::string& gpu_type) const;
};

/// A profile as JSON in the layout of Sailor's profiles_tmp.json:
/// `{model: {gpu_type: {micro_batch: {tp: {layer: [fwd_s, bwd_s, update_s]}}}}}` (what
/// `sailor profile` writes; a Sailor checkout can use the file as its profiles_tmp.json).
std::string to_profile_json(const model_profile& profile);

/// Reads such a file. `model` picks the model's entry; empty: the file must hold exactly one.
/// Errors name the file and the field.
result<model_profile> load_profile_json(const std::string& path, const std::string& model = "");

}  // namespace sailor::config
