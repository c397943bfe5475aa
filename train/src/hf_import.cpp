#include "hf_import.hpp"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

#include "hf_names.hpp"
#include "shape_text.hpp"

namespace sailor::train::detail {
namespace {

// The tensor as fp32, in the file's shape.
result<torch::Tensor> read_float(const safetensors_set& set, const stored_tensor& t) {
  torch::Dtype dtype;
  if (t.dtype == "F32") dtype = torch::kFloat;
  else if (t.dtype == "F16") dtype = torch::kHalf;
  else if (t.dtype == "BF16") dtype = torch::kBFloat16;
  else if (t.dtype == "F64") dtype = torch::kDouble;
  else return error::invalid_input(t.file, t.name, "dtype " + t.dtype + ": expected F32, F16, BF16 or F64");
  auto bytes = set.read(t);
  if (!bytes) return bytes.error();
  return torch::from_blob(bytes->data(), t.shape, dtype).to(torch::kFloat, false, /*copy=*/true);
}

// The source tensor in our layout (transposed, q, k or v of a fused c_attn), checked against
// `want` (the full parameter's shape) under the source's row rule.
result<torch::Tensor> our_layout(const stored_tensor& t, torch::Tensor full, const hf_source& src,
                                 const std::vector<std::int64_t>& want, const std::string& ours,
                                 const std::string& model) {
  auto shape_error = [&](const std::string& got) {
    return error::invalid_input(t.file, t.name, "shape " + shape_text(t.shape) + " there (" + got + " as " + ours +
                                                  "), expected " + shape_text(want) + " for model " + model);
  };
  if (src.transpose) {
    if (full.dim() != 2) return shape_error("not a matrix");
    full = full.t();
  }
  if (src.part >= 0) {
    if (full.dim() < 1 || full.size(0) % 3 != 0) return shape_error("not three equal parts of q, k and v");
    full = full.chunk(3, 0)[static_cast<std::size_t>(src.part)];
  }
  const auto got = full.sizes().vec();
  bool fits = got.size() == want.size() && !got.empty();
  for (std::size_t d = 0; fits && d < got.size(); ++d) {
    if (d > 0 || src.row_rule == hf_source::rows::exact) fits = got[d] == want[d];
    else if (src.row_rule == hf_source::rows::at_most_ours) fits = got[d] <= want[d];
    else fits = got[d] >= want[d];
  }
  if (!fits) return shape_error(shape_text(got));
  return full;
}

// This rank's slice of `full` (our layout, possibly fewer or more rows than the parameter):
// what to copy and where. Rows the file lacks (a padded vocabulary) keep their values.
std::pair<torch::Tensor, torch::Tensor> rank_slice(torch::Tensor full, const models::stage_parameter& p, int rank) {
  torch::Tensor dst = p.tensor.detach();
  if (p.shard_dim == 1) full = full.narrow(1, rank * dst.size(1), dst.size(1));
  const std::int64_t begin = p.shard_dim == 0 ? rank * dst.size(0) : 0;
  const std::int64_t count = std::clamp<std::int64_t>(full.size(0) - begin, 0, dst.size(0));
  return {full.narrow(0, begin, count), dst.narrow(0, 0, count)};
}

}  // namespace

result<import_counts> import_into(models::stage_module& module, const safetensors_set& set) {
  const auto& model = module.model();
  import_counts counts;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (source, destination)
  for (const auto& p : module.parameters()) {
    const hf_source src = hf_source_of(model, p.name);
    if (src.name.empty())
      return error::invalid_input("", p.name, "no Hugging Face name for this parameter of model " + model.name);
    const stored_tensor* t = set.find(src.name);
    if (!t)
      return error::invalid_input(set.path(), src.name, "missing: model " + model.name + " needs it for " + p.name);
    auto full = read_float(set, *t);
    if (!full) return full.error();
    auto want = p.tensor.sizes().vec();
    if (p.shard_dim >= 0) want[static_cast<std::size_t>(p.shard_dim)] = p.full_size;
    auto ours = our_layout(*t, *full, src, want, p.name, model.name);
    if (!ours) return ours.error();
    if (!torch::isfinite(*ours).all().item<bool>())
      return error::invalid_input(t->file, t->name, "holds a value that is not finite (NaN or infinite)");
    copies.push_back(rank_slice(*ours, p, module.tp().rank));
    if (counts.used.insert(t->name).second) counts.bytes += static_cast<std::int64_t>(t->end - t->begin);
    ++counts.tensors;
  }
  torch::NoGradGuard no_grad;
  for (auto& [from, to] : copies) to.copy_(from);
  return counts;
}

}  // namespace sailor::train::detail
