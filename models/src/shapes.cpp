#include <sailor/models/shapes.hpp>

#include <cstdio>
#include <cstdlib>

#include <sailor/config/shipped_models.hpp>

namespace sailor::models {

config::model_shape tiny_gpt_shape() {
  // Its own name: configs/models/tiny.yaml's "tiny-gpt" is another model (hidden 64, sequence 32).
  return {.name = "tiny-gpt-4x32", .num_layers = 4, .hidden = 32, .heads = 4,
          .sequence = 16, .vocabulary = 64, .precision = config::dtype::fp32};
}

config::model_shape tiny_opt_shape() {
  auto m = tiny_gpt_shape();
  m.name = "tiny-opt";
  m.arch = config::architecture::opt;
  return m;
}

config::model_shape tiny_llama_shape() {
  auto m = tiny_gpt_shape();
  m.name = "tiny-llama";
  m.arch = config::architecture::llama;
  m.kv_heads = 2;
  m.ffn_hidden = 64;
  m.gated_mlp = true;
  m.learned_positions = false;
  m.bias = false;
  return m;
}

config::model_shape opt_350m_shape(config::dtype precision) {
  auto m = config::find_shipped_model("OPT-350M");
  if (!m) {
    std::fprintf(stderr, "sailor: OPT-350M is not among the shipped models (configs/models)\n");
    std::abort();
  }
  m->precision = precision;
  return *m;
}

}  // namespace sailor::models
