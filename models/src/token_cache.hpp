#pragma once
// A text tokenized once: the ids kept in a file next to the data (token_data.cpp's text path).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/job.hpp>
#include <sailor/models/bpe.hpp>

namespace sailor::models {

struct tokenized_text {
  std::vector<std::uint32_t> ids;
  std::shared_ptr<const gpt2_bpe> bpe;
  std::string cache_file;  ///< where the ids are kept ("" when the folder is not writable)
  bool from_cache = false;
};

/// The ids of `text` (the contents of `file`) under the BPE `tokenizer` names: read from
/// `<file>.gpt2_bpe-<hash>.u32` when an earlier run wrote it (the hash covers the text, the
/// vocabulary and the merges), else tokenized, with progress logged every tenth of the text,
/// and written there (to a temporary name first, so that nodes sharing the folder never read
/// half a file). Errors name the tokenizer's files.
result<tokenized_text> tokenize_text(const std::string& file, const std::string& text,
                                     const config::tokenizer_source& tokenizer);

/// The pieces of `text`, each ending where GPT-2's pre-tokenizer starts a piece whatever
/// follows (after a newline between two characters that are not white space), about
/// `chunk_bytes` each: tokenizing them one by one gives the ids of the whole.
std::vector<std::string_view> text_chunks(std::string_view text, std::size_t chunk_bytes);

}  // namespace sailor::models
