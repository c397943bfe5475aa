#pragma once
// How `sailor generate` (and the sample `sailor train` shows at its end) turns a prompt into
// ids and ids into text: with the tokenizer a text job kept next to its checkpoints, and
// `sailor export` beside the model (train/export.hpp names the files).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::app {

struct text_codec {
  std::string file;    ///< the tokenizer's file in the folder (errors name it)
  int vocabulary = 0;  ///< the ids it has: only these are drawn
  /// The prompt's ids. `skip_unknown`: characters a character vocabulary lacks are dropped
  /// (none left: its first symbol) rather than refused; the other tokenizers take any text
  /// (SentencePiece: its unknown piece dropped too; an empty prompt: its first piece of text,
  /// GPT-2's: a newline).
  std::function<result<std::vector<std::int64_t>>(const std::string& prompt, bool skip_unknown)> encode;
  std::function<std::string(const std::vector<std::int64_t>& ids)> decode;
};

/// The tokenizer kept in `folder`: a SentencePiece model (tokenizer.model), GPT-2's
/// vocabulary and merges (gpt2-vocab.json, gpt2-merges.txt) or a character vocabulary
/// (vocab.json), in that order. Errors: none of them (a job on token files or synthetic data),
/// or one that cannot be read, named.
result<text_codec> text_codec_in(const std::string& folder);

}  // namespace sailor::app
