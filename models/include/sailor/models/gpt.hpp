#pragma once
/// A GPT-style decoder built from tensor-parallel layers (as Megatron-LM builds it), cut into
/// stage modules by layer range.
///
/// Includes LibTorch: only the training executor (actors/src/train/) includes this header;
/// everything else talks to the executor through its torch-free header.
///
/// Layers as in config/model.hpp: 0 = token embedding (vocabulary-parallel) + learned
/// positions, 1..L = pre-norm blocks (causal self-attention with column-parallel q, k, v and
/// a row-parallel output projection; MLP with a column-parallel fc1 and a row-parallel fc2),
/// L+1 = final layer norm, vocabulary-parallel head and vocabulary-parallel cross-entropy.
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

private:
  torch::Tensor add(const std::string& name, int layer, std::vector<std::int64_t> full_shape,
                     int shard_dim, const std::string& init);
  torch::Tensor embed(const torch::Tensor& tokens);
  torch::Tensor block(int layer, const torch::Tensor& x);
  torch::Tensor head_loss(const torch::Tensor& x, const torch::Tensor& targets);
  const torch::Tensor& param(const std::string& name) const;

  config::model_shape model_;
  int first_layer_;
  int end_layer_;
  tp_group tp_;
  std::uint64_t seed_;
  std::vector<stage_parameter> params_;
  std::map<std::string, torch::Tensor> by_name_;
};

}  // namespace sailor::models
