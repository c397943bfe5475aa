#pragma once
// A text tokenized once: the ids kept in a file next to the data (token_data.cpp's text path).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/job.hpp>
#include <sailor/models/bpe.hpp>
#include <sailor/models/sentencepiece.hpp>

namespace sailor::models {

struct tokenized_text {
  std::vector<std::uint32_t> ids;
  std::shared_ptr<const gpt2_bpe> bpe;                          ///< gpt2_bpe
  std::shared_ptr<const sentencepiece_tokenizer> sentencepiece;  ///< sentencepiece
  int vocabulary = 0;      ///< the tokenizer's ids (largest + 1)
  std::string origin;      ///< the tokenizer's file errors name (vocab.json, or the .model)
  std::string cache_file;  ///< where the ids are kept ("" when the folder is not writable)
  bool from_cache = false;
};

/// The ids of `text` (the contents of `file`) under the tokenizer `tokenizer` names (gpt2_bpe
/// or sentencepiece): read from `<file>.<kind>-<hash>.u32` when an earlier run wrote it (the
/// hash covers the text and the tokenizer's files), else tokenized, with progress logged every
/// tenth of the text, and written there (to a temporary name first, so that nodes sharing the
/// folder never read half a file). Errors name the tokenizer's files.
///
/// The text is tokenized in the chunks of text_chunks. For GPT-2's BPE their ids are the
/// whole's; SentencePiece sees each chunk as a document of its own (a chunk starts a line, so
/// a model with a dummy prefix puts its space before the chunk's first word), as its own
/// spm_encode sees each line.
result<tokenized_text> tokenize_text(const std::string& file, const std::string& text,
                                     const config::tokenizer_source& tokenizer);

/// The pieces of `text`, each ending where GPT-2's pre-tokenizer starts a piece whatever
/// follows (after a newline between two characters that are not white space), about
/// `chunk_bytes` each: tokenizing them one by one gives the ids of the whole.
std::vector<std::string_view> text_chunks(std::string_view text, std::size_t chunk_bytes);

}  // namespace sailor::models
