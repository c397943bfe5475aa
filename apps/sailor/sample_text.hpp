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
  int top_k = 0;             ///< 0: every character
  std::uint64_t seed = 1;
  int iteration = 0;         ///< the checkpoint after this many iterations (0: the latest)
  /// Drop the prompt's characters the vocabulary lacks (none left: start from its first
  /// symbol) instead of refusing the prompt.
  bool skip_unknown = false;
};

/// The prompt (as used) and `tokens` characters sampled after it on the CPU, from the model of the
/// checkpoint in `checkpoint_dir` with the characters of its vocabulary (vocab.json beside
/// it). Errors: no vocabulary (a job on token files or synthetic data), a prompt character
/// the vocabulary lacks, no checkpoint; or a build without LibTorch.
result<std::string> sample_text(const config::model_shape& model, const std::string& checkpoint_dir,
                                const std::string& prompt, const text_sample_options& options);

}  // namespace sailor::app
