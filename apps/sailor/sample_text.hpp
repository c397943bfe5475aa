#pragma once
// Text sampled from a text job's checkpoint: what `sailor generate` prints and what `sailor
// train` / `sailor demo` show at their end.
#include <cstdint>
#include <string>

#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

struct text_sample_options {
  int tokens = 200;
  double temperature = 0.8;  ///< 0: greedy
  int top_k = 0;             ///< 0: every token
  std::uint64_t seed = 1;
  int iteration = 0;         ///< the checkpoint after this many iterations (0: the latest)
  /// Drop the prompt's characters the vocabulary lacks (none left: start from its first
  /// symbol) instead of refusing the prompt.
  bool skip_unknown = false;
  /// Sample from this safetensors file (what sailor export wrote; `checkpoint_dir` is then its
  /// folder, with vocab.json) instead of a checkpoint.
  std::string exported_file;
};

/// The prompt (as used) and `tokens` tokens sampled after it on the CPU, from the model of the
/// checkpoint in `checkpoint_dir`, decoded with the tokenizer the job kept beside it (its
/// characters, vocab.json, or a copy of its SentencePiece or GPT-2 tokenizer: text_codec.hpp).
/// Errors: no tokenizer (a job on token files or synthetic data), a prompt character a
/// character vocabulary lacks, no checkpoint; or a build without LibTorch.
result<std::string> sample_text(const config::model_shape& model, const std::string& checkpoint_dir,
                                const std::string& prompt, const text_sample_options& options);

/// Writes the model of the checkpoint after `iterations` iterations in `checkpoint_dir` (0: the
/// latest) to `out_file` (safetensors with Hugging Face's names), config.json beside it and,
/// for a text job, its tokenizer (vocab.json, tokenizer.model or gpt2-vocab.json and
/// gpt2-merges.txt, copied from the checkpoint's folder) and the model file (`model_file`
/// copied to sailor-model.yaml), so that the folder holds what `sailor generate` needs.
/// Returns the number of tensors written; `tokenizer` gets the names of the tokenizer files
/// copied ("" for none).
result<int> export_model_files(const config::model_shape& model, const std::string& model_file,
                               const std::string& checkpoint_dir, int iterations,
                               const std::string& out_file, std::string& tokenizer);

/// The model file sailor export writes beside the model.
inline const char* exported_model_file() { return "sailor-model.yaml"; }

}  // namespace sailor::app
