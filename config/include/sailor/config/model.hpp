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

  int num_all_layers() const { return num_layers + 2; }
  layer_kind kind_of(int layer) const;
  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }

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
