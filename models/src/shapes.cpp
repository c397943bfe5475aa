#include <sailor/models/shapes.hpp>

#include <cstdio>
#include <cstdlib>

#include <sailor/config/shipped_models.hpp>

namespace sailor::models {

config::model_shape tiny_gpt_shape() {
  // Its own name: configs/models/tiny.yaml's "tiny-gpt" is another model (hidden 64, sequence 32).
  config::model_shape m;
  m.name = "tiny-gpt-4x32";
  m.num_layers = 4;
  m.hidden = 32;
  m.heads = 4;
  m.sequence = 16;
  m.vocabulary = 64;
  m.precision = config::dtype::fp32;
  return m;
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
