#pragma once
// Hugging Face's names of our parameters (private to train/, no LibTorch): what export writes
// and --init-from reads, for GPT2LMHeadModel, OPTForCausalLM and LlamaForCausalLM.
//
// Ours are "layer<i>.<part>" with layer 0 the embedding, 1..L the blocks, L+1 the head.

#include <string>
#include <utility>

#include <sailor/config/model.hpp>

namespace sailor::train::detail {

/// A block's parameter (ours, under "layer<i>.") and Hugging Face's name of it (under the
/// family's prefix for block i - 1), where the tensor is the same.
using layer_name = std::pair<const char*, const char*>;
inline constexpr layer_name opt_layer_names[] = {
    {"attn.q", "self_attn.q_proj"}, {"attn.k", "self_attn.k_proj"}, {"attn.v", "self_attn.v_proj"},
    {"attn.out", "self_attn.out_proj"}, {"ln1", "self_attn_layer_norm"}, {"ln2", "final_layer_norm"},
    {"mlp.fc1", "fc1"}, {"mlp.fc2", "fc2"}};
inline constexpr layer_name llama_layer_names[] = {
    {"attn.q", "self_attn.q_proj"}, {"attn.k", "self_attn.k_proj"}, {"attn.v", "self_attn.v_proj"},
    {"attn.out", "self_attn.o_proj"}, {"ln1", "input_layernorm"}, {"ln2", "post_attention_layernorm"},
    {"mlp.gate", "mlp.gate_proj"}, {"mlp.fc1", "mlp.up_proj"}, {"mlp.fc2", "mlp.down_proj"}};

/// Where one of our parameters is in a Hugging Face checkpoint.
struct hf_source {
  std::string name;        ///< the tensor's name there; empty: the family has none for it
  bool transpose = false;  ///< stored [in, out] (GPT-2's Conv1D)
  int part = -1;           ///< GPT-2's fused c_attn: q 0, k 1, v 2 of its rows (after transposing)
  /// How its first dimension may differ there: the word embedding and head may hold fewer
  /// rows (ours padded for a TP degree), the positions more (a longer context).
  enum class rows { exact, at_most_ours, at_least_ours } row_rule = rows::exact;
};

/// Hugging Face's tensor of our parameter `ours` in `model`'s family. A tied head's copy of
/// the embedding reads the embedding's tensor.
hf_source hf_source_of(const config::model_shape& model, const std::string& ours);

/// Tensors of a Hugging Face checkpoint that hold no parameter (attention masks, rotary
/// tables): skipped without a word.
bool hf_buffer(const std::string& name);

}  // namespace sailor::train::detail
