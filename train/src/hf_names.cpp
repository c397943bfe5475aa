#include "hf_names.hpp"

#include <span>

namespace sailor::train::detail {
namespace {

using config::architecture;

// GPT-2's block tensors: ours -> theirs under "transformer.h.<n>.", Conv1D ones transposed.
struct gpt2_name {
  const char* ours;
  const char* theirs;
  bool transpose;
  int part;
};
constexpr gpt2_name gpt2_block_names[] = {
    {"ln1.weight", "ln_1.weight", false, -1},          {"ln1.bias", "ln_1.bias", false, -1},
    {"attn.q.weight", "attn.c_attn.weight", true, 0},  {"attn.k.weight", "attn.c_attn.weight", true, 1},
    {"attn.v.weight", "attn.c_attn.weight", true, 2},  {"attn.q.bias", "attn.c_attn.bias", false, 0},
    {"attn.k.bias", "attn.c_attn.bias", false, 1},     {"attn.v.bias", "attn.c_attn.bias", false, 2},
    {"attn.out.weight", "attn.c_proj.weight", true, -1}, {"attn.out.bias", "attn.c_proj.bias", false, -1},
    {"ln2.weight", "ln_2.weight", false, -1},          {"ln2.bias", "ln_2.bias", false, -1},
    {"mlp.fc1.weight", "mlp.c_fc.weight", true, -1},   {"mlp.fc1.bias", "mlp.c_fc.bias", false, -1},
    {"mlp.fc2.weight", "mlp.c_proj.weight", true, -1}, {"mlp.fc2.bias", "mlp.c_proj.bias", false, -1}};

hf_source block_source(const config::model_shape& m, int block, const std::string& rest) {
  const std::string n = std::to_string(block);
  if (m.arch == architecture::gpt2) {
    for (const auto& g : gpt2_block_names)
      if (rest == g.ours) return {"transformer.h." + n + "." + g.theirs, g.transpose, g.part};
    return {};
  }
  std::span<const layer_name> names = m.arch == architecture::opt ? std::span<const layer_name>(opt_layer_names)
                                                                  : std::span<const layer_name>(llama_layer_names);
  const std::string prefix = m.arch == architecture::opt ? "model.decoder.layers." + n + "." : "model.layers." + n + ".";
  for (const auto& [a, b] : names)
    for (const char* suffix : {".weight", ".bias"})
      if (rest == std::string(a) + suffix) return {prefix + b + suffix};
  return {};
}

hf_source embedding_source(const config::model_shape& m, const std::string& rest) {
  using rows = hf_source::rows;
  const bool word = rest == "word.weight";
  if (!word && rest != "position.weight") return {};
  hf_source s;
  s.row_rule = word ? rows::at_most_ours : rows::at_least_ours;
  switch (m.arch) {
    case architecture::gpt2: s.name = word ? "transformer.wte.weight" : "transformer.wpe.weight"; break;
    case architecture::opt:
      s.name = word ? "model.decoder.embed_tokens.weight" : "model.decoder.embed_positions.weight";
      break;
    case architecture::llama: s.name = word ? "model.embed_tokens.weight" : ""; break;
  }
  return s;
}

hf_source head_source(const config::model_shape& m, const std::string& rest) {
  if (rest == "head.weight") {
    if (m.tied_embeddings) return embedding_source(m, "word.weight");
    return {"lm_head.weight", false, -1, hf_source::rows::at_most_ours};
  }
  const std::string norm = m.arch == architecture::gpt2  ? "transformer.ln_f."
                           : m.arch == architecture::opt ? "model.decoder.final_layer_norm."
                                                         : "model.norm.";
  if (rest == "ln.weight" || rest == "ln.bias") return {norm + rest.substr(3)};
  return {};
}

}  // namespace

hf_source hf_source_of(const config::model_shape& model, const std::string& ours) {
  if (!ours.starts_with("layer")) return {};
  const auto dot = ours.find('.');
  if (dot == std::string::npos || dot == 5) return {};
  int layer = 0;
  for (std::size_t i = 5; i < dot; ++i) {
    if (ours[i] < '0' || ours[i] > '9') return {};
    layer = layer * 10 + (ours[i] - '0');
  }
  const std::string rest = ours.substr(dot + 1);
  if (layer == 0) return embedding_source(model, rest);
  if (layer <= model.num_layers) return block_source(model, layer - 1, rest);
  if (layer == model.num_layers + 1) return head_source(model, rest);
  return {};
}

bool hf_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         name.ends_with("rotary_emb.inv_freq");
}

}  // namespace sailor::train::detail
