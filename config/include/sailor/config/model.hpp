#pragma once
/// A decoder-only transformer's shape (GPT/OPT/Llama style) and what follows from it.
///
/// Layers are numbered as Sailor numbers them: 0 is the embedding, 1..num_layers are the
/// transformer blocks and num_layers+1 is the head with the loss; num_all_layers() = L + 2.

#include <cstdint>
#include <string>

namespace sailor::config {

enum class dtype { fp32, fp16, bf16 };
const char* to_string(dtype type);
int bytes_of(dtype type);

enum class layer_kind { embedding, block, head };

/// The block family a model is built from (models/ trains each):
/// - gpt2: LayerNorm, learned positions, GELU MLP, biases unless `bias: false`;
/// - opt: LayerNorm, learned positions indexed from OPT's offset of 2, ReLU MLP, biases;
/// - llama: RMSNorm, rotary position embedding, SwiGLU MLP (gated_mlp), grouped-query
///   attention (kv_heads), no biases.
enum class architecture { gpt2, opt, llama };
const char* to_string(architecture a);

struct model_shape {
  std::string name;         ///< our name, e.g. OPT-350M
  std::string sailor_name;  ///< Sailor's name for profiles, e.g. OPT-350 (may be empty)
  int num_layers = 0;       ///< transformer blocks
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;         ///< grouped-query attention; 0 means = heads
  int ffn_hidden = 0;       ///< 0 means 4 * hidden
  bool gated_mlp = false;   ///< SwiGLU (Llama): three ffn matrices instead of two
  int sequence = 0;
  int vocabulary = 0;
  dtype precision = dtype::fp16;
  bool tied_embeddings = false;
  bool learned_positions = true;  ///< a position-embedding table (GPT/OPT); false for RoPE (Llama)
  architecture arch = architecture::gpt2;
  bool bias = true;          ///< biases in linear layers and layer norms (Llama: none)
  double norm_eps = 1e-5;    ///< epsilon of LayerNorm / RMSNorm
  double rope_theta = 10000; ///< base of the rotary frequencies (Llama 3: 500000)
  /// gpt2: the MLP's GELU by its tanh approximation, as Hugging Face's GPT-2 computes it
  /// (`activation: gelu_new`); false: the exact GELU (`activation: gelu`, the default).
  bool gelu_tanh = false;

  int num_all_layers() const { return num_layers + 2; }
  layer_kind kind_of(int layer) const;
  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  /// OPT's learned positions start at row 2 of the table (rows 0 and 1 are never read).
  int position_offset() const { return arch == architecture::opt ? 2 : 0; }
  /// Rows of the learned position table (0 without one).
  int position_rows() const { return learned_positions ? sequence + position_offset() : 0; }
  /// Parameters of one norm (RMSNorm and bias-free LayerNorm: a gain only).
  std::int64_t params_of_norm() const;

  /// Parameters of one layer (numbered as above).
  std::int64_t params_of_layer(int layer) const;
  std::int64_t params_of_block() const;
  std::int64_t total_params() const;
  /// Forward FLOPs of one layer for `micro_batch` sequences (matmuls and attention scores;
  /// backward is about twice this).
  double forward_flops_of_layer(int layer, int micro_batch) const;
  /// Bytes of the activation one stage sends the next for `micro_batch` sequences.
  std::int64_t boundary_activation_bytes(int micro_batch) const;
};

}  // namespace sailor::config
