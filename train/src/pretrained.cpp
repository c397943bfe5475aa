// A model trained elsewhere into a plan (pretrained.hpp): the whole file checked layer by
// layer before planning, and each rank's slice loaded into its stage.

#include <sailor/train/pretrained.hpp>

#include <set>

#include <torch/torch.h>

#include <sailor/train/executor.hpp>
#include <sailor/models/gpt.hpp>

#include "executor_impl.hpp"
#include "hf_import.hpp"
#include "hf_names.hpp"

namespace sailor::train {
namespace {

// A tensor of the file no parameter reads, that would change the model if it were dropped:
// a non-zero bias of a model without biases.
status check_unused(const config::model_shape& model, const detail::safetensors_set& set,
                    const std::string& name, pretrained_summary& out) {
  if (detail::hf_buffer(name)) return {};
  const auto& t = set.tensors().at(name);
  if (!model.bias && name.ends_with(".bias") && detail::float_dtype_bytes(t.dtype) > 0) {
    auto bytes = set.read(t);
    if (!bytes) return bytes.error();
    for (std::byte b : *bytes)  // +0.0 in every float format is all zero bits
      if (b != std::byte{0})
        return error::invalid_input(t.file, name, "a non-zero bias, but model " + model.name +
                                                    " has none (bias: false in its config)");
    return {};
  }
  out.unused.push_back(name);
  return {};
}

}  // namespace

result<pretrained_summary> check_pretrained(const config::model_shape& model, const std::string& path) {
  try {
    if (auto st = validate_architecture(model)) return *st;
    auto set = detail::safetensors_set::open(path);
    if (!set) return set.error();
    pretrained_summary out;
    std::set<std::string> used;
    for (int layer = 0; layer < model.num_all_layers(); ++layer) {
      models::stage_module one(model, layer, layer + 1, models::tp_group{}, 1);
      auto counts = detail::import_into(one, *set);
      if (!counts) return counts.error();
      if (layer == model.num_layers + 1 && model.tied_embeddings) --counts->tensors;  // the embedding's copy
      out.tensors += counts->tensors;
      for (const auto& name : counts->used)
        if (used.insert(name).second) out.bytes += static_cast<std::int64_t>(set->tensors().at(name).end -
                                                                             set->tensors().at(name).begin);
    }
    for (const auto& [name, t] : set->tensors())
      if (!used.count(name))
        if (auto st = check_unused(model, *set, name, out)) return *st;
    return out;
  } catch (const std::exception& e) {
    return error::invalid_input(path, "", std::string("reading it failed: ") + e.what());
  }
}

status stage_executor::load_pretrained(const std::string& path) {
  try {
    auto set = detail::safetensors_set::open(path);
    if (!set) return set.error();
    auto counts = detail::import_into(*impl_->module, *set);
    if (!counts) return counts.error();
    if (impl_->outer) impl_->outer->reset();  // DiLoCo's anchor: the loaded weights
    return {};
  } catch (const std::exception& e) {
    return error::invalid_input(path, "", impl_->who + " loading it failed: " + e.what());
  }
}

}  // namespace sailor::train
