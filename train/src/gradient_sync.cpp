// Gradient synchronisation: the data-parallel all-reduce of each layer's gradients among the
// replicas of its stage (reduce_layer, run by the gradient_reducer while the backward goes on),
// then, once the backward is done, the rest of it and the sum of tied embeddings.
#include "executor_impl.hpp"

namespace sailor::train {

// Sums the gradients of `layer` over the replicas of this stage, slice by slice.
void stage_executor::impl::reduce_layer(int layer) {
  torch::NoGradGuard no_grad;
  const auto& params = module->parameters();
  if (flat.in_place) {
    // Layers arrive last first; a bucket is the range from this layer to the pending end.
    auto [begin, end] = flat.layers[layer - module->first_layer()];
    if (flat.pending_end < 0) flat.pending_end = end;
    const std::int64_t bytes = (flat.pending_end - begin) * flat.buffer.element_size();
    if (bytes < bucket_bytes && layer != module->first_layer()) return;
    auto bucket = flat.buffer.narrow(0, begin, flat.pending_end - begin);
    flat.pending_end = -1;
    if (bucket.numel() == 0) return;
    auto st = dp_groups[0].comm->all_reduce(view_of(bucket));
    if (st) throw std::runtime_error(st->to_string());
    return;
  }
  // Gather every group's buffer before reducing any: a replicated gradient goes into several
  // groups and must be read before it is overwritten.
  std::vector<torch::Tensor> buffers(dp_groups.size());
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    std::vector<torch::Tensor> parts;
    for (const auto& s : dp_groups[k].slices) {
      if (param_layer[s.param] != layer) continue;
      auto grad = params[s.param].tensor.grad();
      parts.push_back((s.dim < 0 ? grad : grad.narrow(s.dim, s.offset, s.length)).reshape({-1}));
    }
    if (!parts.empty()) buffers[k] = torch::cat(parts).contiguous();
  }
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    if (!buffers[k].defined()) continue;
    auto st = dp_groups[k].comm->all_reduce(view_of(buffers[k]));
    if (st) throw std::runtime_error(st->to_string());
  }
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    if (!buffers[k].defined()) continue;
    std::int64_t at = 0;
    for (const auto& s : dp_groups[k].slices) {
      if (param_layer[s.param] != layer) continue;
      auto grad = params[s.param].tensor.mutable_grad();
      auto target = s.dim < 0 ? grad : grad.narrow(s.dim, s.offset, s.length);
      target.copy_(buffers[k].narrow(0, at, target.numel()).view(target.sizes()));
      at += target.numel();
    }
  }
}

double stage_executor::impl::finish_gradient_sync(std::unique_ptr<gradient_reducer> reducer) {
  double dp_seconds = 0;
  if (reducer) {
    // What remains of the data-parallel all-reduce after the backward.
    auto start = clock_type::now();
    reducer->finish();
    reducer.reset();
    dp_seconds = seconds_since(start);
  }
  // The backward accumulates into the bound gradients in place; anything else would have
  // left reduced buffers unread.
  TORCH_CHECK(flat_bound(), "gradients are no longer views into the flat buffer");
  detail::sum_tied_gradients(plan, role, counts_norm, *module, step_reduce());
  return dp_seconds;
}

}  // namespace sailor::train
