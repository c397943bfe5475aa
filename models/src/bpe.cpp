// Byte-level BPE (see bpe.hpp): the files, the merges, encoding and decoding.
#include "sailor/models/bpe.hpp"

#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sailor::models {
namespace {

result<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return sailor::error::not_found(path, "", "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The UTF-8 characters of `s` (a token string of GPT-2's printable characters).
std::vector<std::string> characters(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

result<gpt2_bpe> gpt2_bpe::load(const std::string& vocab_json, const std::string& merges_txt) {
  auto vocab = read_whole(vocab_json);
  if (!vocab)
    return vocab.error();
  auto merges = read_whole(merges_txt);
  if (!merges)
    return merges.error();
  auto bpe = parse(*vocab, "", vocab_json);
  if (!bpe)
    return bpe.error();
  std::istringstream lines(*merges);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0))
      continue;
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      return sailor::error::invalid_input(merges_txt, "line " + std::to_string(number),
                                          "expected two symbols separated by one space, got '" + line + "'");
    bpe->ranks_.emplace(line, static_cast<int>(bpe->ranks_.size()));
  }
  return bpe;
}

result<gpt2_bpe> gpt2_bpe::parse(const std::string& vocab_json_text, const std::string& merges_text,
                                 const std::string& origin) {
  auto vocab = nlohmann::json::parse(vocab_json_text, nullptr, false);
  if (vocab.is_discarded() || !vocab.is_object())
    return sailor::error::invalid_input(origin, "", "expected a JSON object of token -> id");
  gpt2_bpe bpe;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<std::int64_t>() < 0 ||
        it.value().get<std::int64_t>() >= std::numeric_limits<int>::max())
      return sailor::error::invalid_input(origin, it.key(), "expected a non-negative integer id");
    const auto id = it.value().get<std::int64_t>();
    if (static_cast<std::size_t>(id) >= bpe.tokens_.size())
      bpe.tokens_.resize(static_cast<std::size_t>(id) + 1);
    if (!bpe.tokens_[static_cast<std::size_t>(id)].empty())
      return sailor::error::invalid_input(origin, it.key(), "id " + std::to_string(id) + " is also '" +
                                                              bpe.tokens_[static_cast<std::size_t>(id)] + "'");
    bpe.tokens_[static_cast<std::size_t>(id)] = it.key();
    bpe.ids_.emplace(it.key(), id);
  }
  std::istringstream lines(merges_text);
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty() && line.rfind("#version", 0) != 0)
      bpe.ranks_.emplace(line, static_cast<int>(bpe.ranks_.size()));
  return bpe;
}

std::vector<std::int64_t> gpt2_bpe::encode_piece(std::string_view piece, std::string& missing) const {
  std::string mapped;
  for (char c : piece)
    mapped += gpt2_byte_char(static_cast<unsigned char>(c));
  auto symbols = characters(mapped);
  while (symbols.size() > 1) {
    // The adjacent pair of the lowest rank; every occurrence of it merges at once.
    int best = std::numeric_limits<int>::max();
    std::string best_key;
    for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
      auto it = ranks_.find(symbols[k] + " " + symbols[k + 1]);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        best_key = it->first;
      }
    }
    if (best_key.empty())
      break;
    std::vector<std::string> merged;
    for (std::size_t k = 0; k < symbols.size(); ++k) {
      if (k + 1 < symbols.size() && symbols[k] + " " + symbols[k + 1] == best_key) {
        merged.push_back(symbols[k] + symbols[k + 1]);
        ++k;
      } else {
        merged.push_back(symbols[k]);
      }
    }
    symbols = std::move(merged);
  }
  std::vector<std::int64_t> ids;
  for (const auto& s : symbols) {
    auto it = ids_.find(s);
    if (it == ids_.end()) {
      if (missing.empty())
        missing = s;
      continue;
    }
    ids.push_back(it->second);
  }
  return ids;
}

result<std::vector<std::int64_t>> gpt2_bpe::encode(std::string_view text) const {
  std::unordered_map<std::string_view, std::vector<std::int64_t>> seen;  // pieces repeat
  std::vector<std::int64_t> ids;
  std::string missing;
  for (auto piece : gpt2_pretokenize(text)) {
    auto it = seen.find(piece);
    if (it == seen.end())
      it = seen.emplace(piece, encode_piece(piece, missing)).first;
    if (!missing.empty())
      return sailor::error::invalid_input("tokenizer", "the vocabulary has no token '" + missing +
                                                         "' (for the text '" + std::string(piece) + "')");
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

result<std::string> gpt2_bpe::decode(const std::vector<std::int64_t>& ids) const {
  std::string text;
  for (auto id : ids) {
    if (id < 0 || id >= static_cast<std::int64_t>(tokens_.size()) ||
        tokens_[static_cast<std::size_t>(id)].empty())
      return sailor::error::invalid_input("tokenizer", "id " + std::to_string(id) + " is not in the vocabulary");
    for (const auto& c : characters(tokens_[static_cast<std::size_t>(id)])) {
      const int b = gpt2_char_byte(c);
      if (b < 0)
        return sailor::error::invalid_input("tokenizer", "token " + std::to_string(id) +
                                                           " holds '" + c + "', not a byte's character");
      text += static_cast<char>(b);
    }
  }
  return text;
}

}  // namespace sailor::models
