#include "sailor/config/model.hpp"

#include "enum_names.hpp"

namespace sailor::config {

const char* to_string(dtype type) { return detail::name_in(detail::dtype_names, type); }

const char* to_string(architecture a) { return detail::name_in(detail::architecture_names, a); }

int bytes_of(dtype type) { return type == dtype::fp32 ? 4 : 2; }

layer_kind model_shape::kind_of(int layer) const {
  if (layer == 0) return layer_kind::embedding;
  if (layer == num_layers + 1) return layer_kind::head;
  return layer_kind::block;
}

std::int64_t model_shape::params_of_norm() const {
  return arch == architecture::llama || !bias ? hidden : 2 * std::int64_t(hidden);
}

std::int64_t model_shape::params_of_block() const {
  const std::int64_t h = hidden, f = ffn(), b = bias ? 1 : 0;
  const std::int64_t kv_width = h / heads * kv();
  std::int64_t attention = (h * h + b * h) * 2 + (h * kv_width + b * kv_width) * 2;  // Q, O, K, V
  std::int64_t mlp = gated_mlp ? 3 * h * f + b * (2 * f + h) : 2 * h * f + b * (f + h);
  return attention + mlp + 2 * params_of_norm();
}

std::int64_t model_shape::params_of_layer(int layer) const {
  const std::int64_t h = hidden, v = vocabulary;
  switch (kind_of(layer)) {
    case layer_kind::embedding: return v * h + std::int64_t(position_rows()) * h;
    case layer_kind::block: return params_of_block();
    case layer_kind::head: return params_of_norm() + (tied_embeddings ? 0 : v * h);
  }
  return 0;
}

std::int64_t model_shape::total_params() const {
  std::int64_t n = 0;
  for (int l = 0; l < num_all_layers(); ++l) n += params_of_layer(l);
  return n;
}

double model_shape::forward_flops_of_layer(int layer, int micro_batch) const {
  const double tokens = double(micro_batch) * sequence;
  const double h = hidden;
  switch (kind_of(layer)) {
    case layer_kind::embedding: return 0;
    case layer_kind::head: return 2 * tokens * h * vocabulary;
    case layer_kind::block: {
      const double kv_width = h / heads * kv();
      double matmul_params = 2 * h * h + 2 * h * kv_width + (gated_mlp ? 3.0 : 2.0) * h * ffn();
      double scores = 2 * 2 * tokens * sequence * h;  // QK^T and softmax(QK^T)V
      return 2 * tokens * matmul_params + scores;
    }
  }
  return 0;
}

std::int64_t model_shape::boundary_activation_bytes(int micro_batch) const {
  return std::int64_t(micro_batch) * sequence * hidden * bytes_of(precision);
}

}  // namespace sailor::config
