#pragma once
/// Getting a trained model out: a safetensors file with Hugging Face's parameter names and a
/// config.json beside it (what `sailor export` writes), and text sampled from a checkpoint
/// (what `sailor generate` prints). No LibTorch in this header.
///
/// Both read the checkpoint as a one-rank plan holding every layer would restore it, so a
/// checkpoint of any plan (stages, TP degrees, replicas) gives the whole model.

#include <cstdint>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/model.hpp>

namespace sailor::train {

/// Writes the model of checkpoint `iterations` under `checkpoint_dir` (0: the latest) to
/// `out_file` (safetensors, fp32, Hugging Face names for GPT2LMHeadModel, OPTForCausalLM or
/// LlamaForCausalLM by the model's architecture) and `config.json` in the same folder.
/// Returns the number of tensors written.
result<int> export_safetensors(const config::model_shape& model, const std::string& checkpoint_dir,
                               int iterations, const std::string& out_file);

struct generation_options {
  int tokens = 200;
  double temperature = 0.8;  ///< 0: greedy
  int top_k = 0;             ///< 0: every token
  std::uint64_t seed = 1;
  /// > 0: only ids below it are drawn (a character vocabulary smaller than the model's).
  int vocabulary_limit = 0;
};

/// Samples `options.tokens` ids after `prompt` from the model of checkpoint `iterations`
/// (0: the latest), on the CPU, the context cut to the model's sequence length.
result<std::vector<std::int64_t>> generate_tokens(const config::model_shape& model,
                                                  const std::string& checkpoint_dir, int iterations,
                                                  const std::vector<std::int64_t>& prompt,
                                                  const generation_options& options);

/// Like generate_tokens, from the model export_safetensors wrote to `safetensors_file` (no
/// checkpoint needed). Errors name the file and a tensor that is missing or of another shape.
result<std::vector<std::int64_t>> generate_tokens_exported(const config::model_shape& model,
                                                           const std::string& safetensors_file,
                                                           const std::vector<std::int64_t>& prompt,
                                                           const generation_options& options);

/// The name of the vocabulary file a text job writes next to its checkpoints.
inline const char* vocabulary_file_name() { return "vocab.json"; }
/// The copies of a text job's tokenizer kept there instead, when it has one: its
/// SentencePiece model, or GPT-2's vocabulary and merges.
inline const char* sentencepiece_file_name() { return "tokenizer.model"; }
inline const char* gpt2_vocab_file_name() { return "gpt2-vocab.json"; }
inline const char* gpt2_merges_file_name() { return "gpt2-merges.txt"; }

}  // namespace sailor::train
