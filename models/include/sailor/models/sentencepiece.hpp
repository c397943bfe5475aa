#pragma once
/// A SentencePiece tokenizer (BPE or unigram) read from the model file its trainer writes (a
/// `.model`, as Llama's tokenizer.model), through Debian's libsentencepiece. The library is
/// opened on first use as the module libsailor_sentencepiece.so, found in ../lib/sailor/ from
/// the program's folder or at $SAILOR_SENTENCEPIECE_MODULE (models/src/sentencepiece_module.hpp
/// says why it is not linked).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sailor/config/error.hpp>

namespace sailor::models {

namespace detail {
struct sentencepiece_api;
}

class sentencepiece_tokenizer {
public:
  /// Reads the model file; a missing, unreadable or corrupt one is an error naming it.
  static result<sentencepiece_tokenizer> load(const std::string& model_file);
  /// The same from the file's contents (`origin` names it in errors).
  static result<sentencepiece_tokenizer> parse(const std::string& model_bytes, const std::string& origin);

  /// The ids of `text` as the model segments it (its normalization, and its unknown id, or its
  /// byte pieces when it has them, for what its pieces lack).
  result<std::vector<std::int64_t>> encode(std::string_view text) const;
  /// The text of `ids`; an id outside the vocabulary is an error naming it.
  result<std::string> decode(const std::vector<std::int64_t>& ids) const;
  /// The number of pieces (largest id + 1).
  int vocabulary() const;
  /// Whether `id` stands for text: not a control piece (<s>, </s>), the unknown piece or an
  /// unused one.
  bool is_text(std::int64_t id) const;
  /// The first id that stands for text: where a sample without a prompt starts.
  std::int64_t first_text_id() const;

  /// Trains a model with SentencePiece's trainer (its arguments by name: input, model_prefix,
  /// vocab_size, model_type, ...), writing `<model_prefix>.model`. The tests' tiny models.
  static status train(const std::vector<std::pair<std::string, std::string>>& args);

private:
  const detail::sentencepiece_api* api_ = nullptr;
  std::shared_ptr<void> processor_;
  std::string origin_;
};

}  // namespace sailor::models
