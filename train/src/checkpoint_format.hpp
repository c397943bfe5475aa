#pragma once
// Private to the checkpoint writer (checkpoint.cpp) and reader (checkpoint_restore.cpp): the
// shard file's magic and format version (checkpoint_io.hpp describes the layout), its dtype
// and model-shape fields, and the errors both report. Includes LibTorch.
#include <optional>
#include <stdexcept>
#include <string>

#include <c10/util/string_utils.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <sailor/train/executor.hpp>
#include <sailor/config/error.hpp>
#include <sailor/config/model.hpp>

namespace sailor::train::detail::shard_format {

using json = nlohmann::json;

inline constexpr char magic[] = "SAILORCKPT1\n";  // 12 bytes without the terminator
inline constexpr std::size_t magic_bytes = sizeof(magic) - 1;
inline constexpr int format_version = 1;

inline const char* optimizer_name(optimizer_kind k) { return k == optimizer_kind::adamw ? "adamw" : "sgd"; }

inline std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "f32";
    case torch::kDouble: return "f64";
    case torch::kHalf: return "f16";
    case torch::kBFloat16: return "bf16";
    default: throw std::invalid_argument("checkpoint: unsupported tensor type");
  }
}

inline std::optional<torch::ScalarType> dtype_of(const std::string& name) {
  if (name == "f32") return torch::kFloat;
  if (name == "f64") return torch::kDouble;
  if (name == "f16") return torch::kHalf;
  if (name == "bf16") return torch::kBFloat16;
  return std::nullopt;
}

inline json model_json(const config::model_shape& m) {
  return {{"name", m.name},       {"num_layers", m.num_layers}, {"hidden", m.hidden},
          {"heads", m.heads},     {"kv_heads", m.kv()},         {"ffn", m.ffn()},
          {"sequence", m.sequence}, {"vocabulary", m.vocabulary}};
}

/// The optimizer's key of a parameter's state.
inline std::string key_of(const torch::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

}  // namespace sailor::train::detail::shard_format
