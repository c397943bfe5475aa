#pragma once
/// Byte-level BPE, the tokenizer of GPT-2 and its descendants (no LibTorch here), read from the
/// standard files: `vocab.json` (token string -> id) and `merges.txt` (one merge "a b" per line
/// in priority order, an optional "#version" line first).
///
/// Encoding splits the text with GPT-2's pre-tokenizer pattern
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// maps each piece's bytes to GPT-2's printable characters (bytes_to_unicode), applies the
/// merges lowest rank first and looks the symbols up in the vocabulary. The pattern's classes
/// are exact for ASCII; outside ASCII, Unicode white space is \s, the decimal digits of the
/// common scripts are \p{N}, general and CJK punctuation and the symbol blocks are neither, and
/// every other code point is a letter (no Unicode database is linked).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sailor/config/error.hpp>

namespace sailor::models {

class gpt2_bpe {
public:
  /// Reads the two files; errors name the file and the line or entry that is wrong.
  static result<gpt2_bpe> load(const std::string& vocab_json, const std::string& merges_txt);
  /// The same from the files' contents (`origin` names them in errors).
  static result<gpt2_bpe> parse(const std::string& vocab_json_text, const std::string& merges_text,
                                const std::string& origin = "vocab.json");

  /// The ids of `text`. An error names the first symbol the vocabulary lacks (a complete
  /// byte-level vocabulary has every byte, so it never fails).
  result<std::vector<std::int64_t>> encode(std::string_view text) const;
  /// The text of `ids`; an id outside the vocabulary is an error naming it.
  result<std::string> decode(const std::vector<std::int64_t>& ids) const;
  /// Largest id + 1.
  int vocabulary() const { return static_cast<int>(tokens_.size()); }

private:
  // The ids of one pre-tokenized piece; `missing` gets the first symbol without an id.
  std::vector<std::int64_t> encode_piece(std::string_view piece, std::string& missing) const;

  std::unordered_map<std::string, std::int64_t> ids_;
  std::vector<std::string> tokens_;             // id -> token string ("" where unused)
  std::unordered_map<std::string, int> ranks_;  // "a b" (a merges.txt line) -> priority
};

/// GPT-2's pre-tokenization of `text` (the pattern above): the pieces, in order, that
/// concatenate to `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

/// GPT-2's printable character (UTF-8) for byte `b`, and back (-1: not one of them).
std::string gpt2_byte_char(unsigned char b);
int gpt2_char_byte(std::string_view utf8_char);

}  // namespace sailor::models
