#pragma once
/// A decoder of one of the block families of config::architecture (GPT-2, OPT, Llama) built
/// from tensor-parallel layers (as Megatron-LM builds it), cut into stage modules by layer
/// range.
///
/// Includes LibTorch: only the training executor (train/src/) includes this header;
/// everything else talks to the executor through its torch-free header.
///
/// Layers as in config/model.hpp: 0 = token embedding (vocabulary-parallel) + learned
/// positions (GPT-2, OPT with its offset of 2), 1..L = pre-norm blocks (causal self-attention
/// with column-parallel q, k, v and a row-parallel output projection, rotary positions and
/// grouped-query attention for Llama; MLP with a column-parallel fc1 (and gate for SwiGLU) and
/// a row-parallel fc2), L+1 = final norm, vocabulary-parallel head (the embedding's matrix
/// when tied) and vocabulary-parallel cross-entropy.
///
/// Parameter names are the same in every family ("layer<N>.attn.q.weight", "mlp.gate",
/// "mlp.fc1" = Llama's up projection, "mlp.fc2" = its down projection); export maps them to
/// each family's Hugging Face names.
///
/// Weights: every parameter's full tensor is drawn from a generator seeded by (seed, layer,
/// parameter name), then the shard of this TP rank is sliced out, so any partition and any
/// TP degree holds the same numbers.
///
/// Process groups are passed in explicitly (tp_group); there is no global state.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <sailor/comm/collective.hpp>
#include <sailor/config/model.hpp>

namespace sailor::models {

/// The tensor-parallel group of one replica, as the layers see it.
struct tp_group {
  comm::communicator* group = nullptr;  ///< null when size == 1
  int rank = 0;
  int size = 1;
  double* all_reduce_seconds = nullptr;  ///< if set, time spent in TP collectives is added
};

/// One parameter of a stage and how it is sharded over TP ranks.
struct stage_parameter {
  std::string name;      ///< e.g. "layer3.attn.q.weight"
  torch::Tensor tensor;  ///< this rank's shard (requires grad)
  /// Dimension split over TP ranks (also when the TP degree is 1: the shard is then the
  /// full tensor); -1: replicated on every TP rank (layer norms, biases after a row-parallel
  /// layer, positions).
  int shard_dim = -1;
  std::int64_t full_size = 0;  ///< size of shard_dim in the full tensor
};

/// Whether weight decay applies to `p`: matrices (linear weights, embeddings, positions) do;
/// layer-norm gains and biases do not (standard practice: decaying them only hurts).
bool decays(const stage_parameter& p);

/// Element-wise TP operators (Megatron's f and g), exposed for tests.
/// Identity forward, all-reduce of the gradient backward.
torch::Tensor copy_to_tp(const torch::Tensor& x, const tp_group& tp);
/// All-reduce forward, identity backward.
torch::Tensor reduce_from_tp(const torch::Tensor& x, const tp_group& tp);
/// Per-token cross-entropy of logits split over the vocabulary: logits [N, V/tp] hold the
/// columns [vocab_start, vocab_start + V/tp); targets [N] are full-vocabulary ids.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits,
                                           const torch::Tensor& targets,
                                           std::int64_t vocab_start, const tp_group& tp);

/// Layers [first_layer, end_layer) of the model, this TP rank's shard.
class stage_module {
public:
  stage_module(const config::model_shape& model, int first_layer, int end_layer, tp_group tp,
               std::uint64_t seed);

  bool has_embedding() const { return first_layer_ == 0; }
  bool has_head() const { return end_layer_ == model_.num_layers + 2; }

  /// Runs the stage. `input` is token ids [mb, seq] (int64) when the stage holds the
  /// embedding, else hidden states [mb, seq, hidden]. Returns hidden states, or, when the
  /// stage holds the head, the mean per-token loss (a scalar) against `targets` [mb, seq].
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& targets = {});
  /// One layer of the stage (first_layer() <= layer < end_layer()); forward() chains them.
  /// Callers that cut the graph between layers (to reduce a layer's gradients while earlier
  /// layers still run their backward) call this per layer.
  torch::Tensor forward_layer(int layer, const torch::Tensor& x, const torch::Tensor& targets = {});
  int first_layer() const { return first_layer_; }
  int end_layer() const { return end_layer_; }
  /// The layer that parameter `param` (index into parameters()) belongs to.
  int layer_of(std::size_t param) const;

  std::vector<stage_parameter>& parameters() { return params_; }
  const std::vector<stage_parameter>& parameters() const { return params_; }
  std::vector<torch::Tensor> tensors() const;
  const tp_group& tp() const { return tp_; }
  /// Points the module at its communicator once it exists (same rank and size: the
  /// parameters were sliced for them).
  void set_tp_group(const tp_group& tp);
  /// Moves the parameters to `device` (before an optimizer is made over them).
  void to(torch::Device device);
  /// Elements of this shard's parameters.
  std::int64_t num_parameters() const;
  /// The head's logits [mb, seq, V/tp] for hidden states `x` (the stage holds the head):
  /// generation and evaluation read them instead of the loss.
  torch::Tensor logits(const torch::Tensor& x);
  const config::model_shape& model() const { return model_; }
  /// With tied embeddings, a stage that holds the head but not the embedding keeps a copy of
  /// the embedding's matrix: its index in parameters(); -1 otherwise. Its gradient must be
  /// summed with the embedding's before the step (the runtime does).
  int tied_head_copy() const;

private:
  /// Draws the parameter from (seed, layer, name), or from (seed, seed_layer, seed_name)
  /// when seed_name is given (a tied head's copy of the embedding).
  torch::Tensor add(const std::string& name, int layer, std::vector<std::int64_t> full_shape,
                    int shard_dim, const std::string& init, int seed_layer = 0,
                    const std::string& seed_name = {});
  torch::Tensor embed(const torch::Tensor& tokens);
  torch::Tensor block(int layer, const torch::Tensor& x);
  torch::Tensor head_loss(const torch::Tensor& x, const torch::Tensor& targets);
  torch::Tensor norm(const std::string& prefix, const torch::Tensor& x) const;
  torch::Tensor linear(const std::string& prefix, const torch::Tensor& x) const;
  torch::Tensor row_parallel_residual(const std::string& prefix, const torch::Tensor& x,
                                      const torch::Tensor& in) const;
  torch::Tensor rotary(const torch::Tensor& x) const;
  torch::Tensor attention(const std::string& layer_prefix, const torch::Tensor& a) const;
  const torch::Tensor& head_matrix() const;
  const torch::Tensor& param(const std::string& name) const;
  torch::Tensor optional_param(const std::string& name) const;  ///< undefined when absent

  config::model_shape model_;
  int first_layer_;
  int end_layer_;
  tp_group tp_;
  std::uint64_t seed_;
  std::vector<stage_parameter> params_;
  std::map<std::string, torch::Tensor> by_name_;
};

}  // namespace sailor::models
