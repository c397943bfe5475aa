#pragma once
/// A user's training data, as the job file's `data:` block names it (no LibTorch here).
///
/// Formats: `text` is UTF-8 read with a character-level tokenizer built from the file (its
/// symbols are the file's distinct code points in code-point order, as nanoGPT's
/// sorted(set(text)) makes them); `tokens-u16` and `tokens-u32` are flat little-endian arrays
/// of token ids, memory-mapped (the format many training repositories write). A text whose
/// job names `tokenizer: {kind: gpt2_bpe, vocab, merges}` is tokenized with GPT-2's byte-level
/// BPE (bpe.hpp), and one that names `tokenizer: {kind: sentencepiece, model}` with that
/// SentencePiece model (sentencepiece.hpp), once, its ids kept next to the data for the next
/// run (token_cache.hpp).
///
/// The first 1 - validation_fraction of the tokens train, the rest validate. Sample i of a
/// split is the sequence + 1 tokens from an offset drawn from (seed, split, i) alone, so any
/// plan that reads the same sample indices trains on the same tokens; the executor numbers
/// training samples (iteration * global_batch + index in the batch), which shards them over
/// data-parallel replicas without making the loss curve depend on the plan.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/job.hpp>

namespace sailor::models {

class gpt2_bpe;
class sentencepiece_tokenizer;

enum class data_split { train, validation };

class token_dataset {
public:
  /// Opens `source` for a model of `vocabulary` ids and `sequence` tokens of context. Errors
  /// name the file and what is wrong: missing or unreadable, a size that is not a multiple of
  /// the token width, a token id at or above the vocabulary (or more text symbols than the
  /// vocabulary holds), a split too short for one sequence.
  static result<std::shared_ptr<const token_dataset>> open(const config::data_source& source,
                                                           int vocabulary, int sequence);
  ~token_dataset();
  token_dataset(const token_dataset&) = delete;
  token_dataset& operator=(const token_dataset&) = delete;

  /// Writes `count` samples of `split` from index `first`, each sequence + 1 tokens, row
  /// after row into `tokens`.
  void fill(data_split split, std::uint64_t seed, std::int64_t first, int count,
            std::int64_t* tokens) const;

  std::int64_t tokens(data_split split) const;
  int sequence() const { return sequence_; }
  /// Ids the data uses: the text's symbols, or the largest id in the file + 1.
  int vocabulary() const { return vocabulary_; }
  /// Character-level text only: the symbol (UTF-8) of each id; empty for token files and for
  /// the other tokenizers.
  const std::vector<std::string>& symbols() const { return symbols_; }
  const std::string& path() const { return path_; }

  /// Text only: ids of `text` under the data's tokenizer (an error names a character the
  /// vocabulary lacks).
  result<std::vector<std::int64_t>> encode(const std::string& text) const;
  std::string decode(const std::vector<std::int64_t>& ids) const;

private:
  token_dataset() = default;
  // Text under a BPE or SentencePiece tokenizer: the ids (token_cache.hpp), checked against the model's vocabulary.
  std::optional<error> tokenize(const std::string& file, const std::string& text,
                                const config::tokenizer_source& tokenizer, int vocabulary);
  // The train / validation split, checked to hold a sequence each.
  static result<std::shared_ptr<const token_dataset>> split(std::shared_ptr<token_dataset> d,
                                                            const config::data_source& source,
                                                            int sequence);
  std::int64_t token_at(std::int64_t index) const;

  std::string path_;
  int sequence_ = 0;
  int vocabulary_ = 0;
  int width_ = 4;                     // bytes per token
  const unsigned char* base_ = nullptr;
  std::int64_t count_ = 0;            // tokens in the file
  std::int64_t train_end_ = 0;        // first validation token
  std::vector<std::uint32_t> owned_;  // text: the encoded file
  void* mapping_ = nullptr;           // token files: the mapping
  std::size_t mapped_bytes_ = 0;
  std::vector<std::string> symbols_;
  std::shared_ptr<const gpt2_bpe> bpe_;  // gpt2_bpe text: the tokenizer
  std::shared_ptr<const sentencepiece_tokenizer> sentencepiece_;  // sentencepiece text
};

/// The character-level vocabulary of `symbols` as JSON (a list of strings, id order), the
/// file written next to checkpoints; and back.
std::string vocabulary_json(const std::vector<std::string>& symbols);
result<std::vector<std::string>> parse_vocabulary_json(const std::string& json);

}  // namespace sailor::models
