// The tokenizer of a text job's checkpoints (see text_codec.hpp).
#include "text_codec.hpp"

#if defined(SAILOR_WITH_TRAIN)
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "sailor/models/bpe.hpp"
#include "sailor/models/sentencepiece.hpp"
#include "sailor/models/token_data.hpp"
#include "sailor/train/export.hpp"

namespace sailor::app {
namespace {

namespace fs = std::filesystem;

result<text_codec> sentencepiece_codec(const std::string& file) {
  auto loaded = models::sentencepiece_tokenizer::load(file);
  if (!loaded) return loaded.error();
  auto sp = std::make_shared<const models::sentencepiece_tokenizer>(std::move(*loaded));
  text_codec c;
  c.file = file;
  c.vocabulary = sp->vocabulary();
  c.encode = [sp](const std::string& prompt, bool skip_unknown) -> result<std::vector<std::int64_t>> {
    auto ids = sp->encode(prompt);
    if (!ids) return ids;
    if (skip_unknown)  // what the model lacks (its unknown piece) dropped
      ids->erase(std::remove_if(ids->begin(), ids->end(), [&sp](std::int64_t id) { return !sp->is_text(id); }),
                 ids->end());
    if (ids->empty()) ids->push_back(sp->first_text_id());
    return ids;
  };
  c.decode = [sp](const std::vector<std::int64_t>& ids) {
    auto text = sp->decode(ids);  // whole: a piece's space depends on what precedes it
    return text ? *text : std::string();
  };
  return c;
}

result<text_codec> gpt2_codec(const std::string& vocab, const std::string& merges) {
  auto loaded = models::gpt2_bpe::load(vocab, merges);
  if (!loaded) return loaded.error();
  auto bpe = std::make_shared<const models::gpt2_bpe>(std::move(*loaded));
  text_codec c;
  c.file = vocab;
  c.vocabulary = bpe->vocabulary();
  c.encode = [bpe](const std::string& prompt, bool) -> result<std::vector<std::int64_t>> {
    auto ids = bpe->encode(prompt.empty() ? std::string("\n") : prompt);
    return ids;
  };
  c.decode = [bpe](const std::vector<std::int64_t>& ids) {
    std::string out;
    for (auto id : ids)  // an id the vocabulary does not use stands for nothing
      if (auto piece = bpe->decode({id})) out += *piece;
    return out;
  };
  return c;
}

// The prompt's characters as ids of `symbols` (see text_codec::encode).
result<std::vector<std::int64_t>> character_ids(const std::vector<std::string>& symbols, const std::string& file,
                                                const std::string& prompt, bool skip_unknown) {
  std::map<std::string, std::int64_t> index;
  for (std::size_t i = 0; i < symbols.size(); ++i) index[symbols[i]] = static_cast<std::int64_t>(i);
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < prompt.size();) {
    const unsigned char c = static_cast<unsigned char>(prompt[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    auto it = index.find(prompt.substr(i, n));
    if (it != index.end())
      ids.push_back(it->second);
    else if (!skip_unknown)
      return sailor::error::invalid_input(
        "--prompt", "the prompt's character '" + prompt.substr(i, n) + "' is not in " + file);
    i += n;
  }
  if (ids.empty() && skip_unknown && !symbols.empty()) ids.push_back(0);
  return ids;
}

result<text_codec> character_codec(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    return sailor::error::invalid_input(file, "", "no vocabulary (written by jobs that train on text)");
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = models::parse_vocabulary_json(text.str());
  if (!parsed) return sailor::error::invalid_input(file, "", parsed.error().message);
  auto symbols = std::make_shared<const std::vector<std::string>>(std::move(*parsed));
  text_codec c;
  c.file = file;
  c.vocabulary = static_cast<int>(symbols->size());
  c.encode = [symbols, file](const std::string& prompt, bool skip_unknown) {
    return character_ids(*symbols, file, prompt, skip_unknown);
  };
  c.decode = [symbols](const std::vector<std::int64_t>& ids) {
    std::string out;
    for (auto id : ids)
      if (id >= 0 && id < static_cast<std::int64_t>(symbols->size())) out += (*symbols)[id];
    return out;
  };
  return c;
}

}  // namespace

result<text_codec> text_codec_in(const std::string& folder) {
  const fs::path dir{folder};
  std::error_code ec;
  if (fs::exists(dir / train::sentencepiece_file_name(), ec))
    return sentencepiece_codec((dir / train::sentencepiece_file_name()).string());
  if (fs::exists(dir / train::gpt2_vocab_file_name(), ec))
    return gpt2_codec((dir / train::gpt2_vocab_file_name()).string(), (dir / train::gpt2_merges_file_name()).string());
  return character_codec((dir / train::vocabulary_file_name()).string());
}

}  // namespace sailor::app
#endif
