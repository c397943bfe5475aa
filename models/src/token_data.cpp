#include <sailor/models/token_data.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <sailor/models/synthetic_data.hpp>

#include "token_cache.hpp"

namespace sailor::models {
namespace {

// The UTF-8 sequences of `text`, one per code point (a malformed byte stands for itself).
std::vector<std::string> code_points(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + n > text.size()) n = 1;
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

// Code-point order of UTF-8 strings equals their byte order.
std::map<std::string, std::uint32_t> index_of(const std::vector<std::string>& symbols) {
  std::map<std::string, std::uint32_t> out;
  for (std::size_t i = 0; i < symbols.size(); ++i) out.emplace(symbols[i], static_cast<std::uint32_t>(i));
  return out;
}

}  // namespace

token_dataset::~token_dataset() {
  if (mapping_ != nullptr) munmap(mapping_, mapped_bytes_);
}

result<std::shared_ptr<const token_dataset>> token_dataset::open(const config::data_source& source,
                                                                 int vocabulary, int sequence) {
  std::shared_ptr<token_dataset> d(new token_dataset());
  d->path_ = source.path;
  d->sequence_ = sequence;
  const std::string& file = source.path;
  int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0)
    return error::of(errno == ENOENT ? error_kind::not_found : error_kind::invalid_input, file, "data", std::string("cannot open the data file: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return error::invalid_input(file, "data", "not a regular file");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (source.format == config::data_format::text) {
    ::close(fd);
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return error::invalid_input(file, "data", "cannot read the data file");
    if (source.tokenizer.kind != config::tokenizer_kind::characters) {
      if (auto err = d->tokenize(file, text, source.tokenizer, vocabulary)) return *err;
      return split(std::move(d), source, sequence);
    }
    auto points = code_points(text);
    std::vector<std::string> symbols = points;
    std::sort(symbols.begin(), symbols.end());
    symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
    auto index = index_of(symbols);
    d->owned_.reserve(points.size());
    for (const auto& p : points) d->owned_.push_back(index.at(p));
    d->symbols_ = std::move(symbols);
    d->vocabulary_ = static_cast<int>(d->symbols_.size());
    d->base_ = reinterpret_cast<const unsigned char*>(d->owned_.data());
    d->count_ = static_cast<std::int64_t>(d->owned_.size());
    if (d->vocabulary_ > vocabulary)
      return error::invalid_input(file, "data", "the text has " + std::to_string(d->vocabulary_) +
                                  " distinct characters, more than the model's vocabulary of " +
                                  std::to_string(vocabulary));
  } else {
    d->width_ = source.format == config::data_format::tokens_u16 ? 2 : 4;
    if (bytes % d->width_ != 0) {
      ::close(fd);
      return error::invalid_input(file, "data", "its size (" + std::to_string(bytes) + " bytes) is not a multiple of " +
                                  std::to_string(d->width_) + " bytes, the width of " +
                                  config::to_string(source.format));
    }
    d->count_ = static_cast<std::int64_t>(bytes / d->width_);
    if (bytes > 0) {
      void* m = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        ::close(fd);
        return error::invalid_input(file, "data", std::string("cannot map the data file: ") + std::strerror(errno));
      }
      d->mapping_ = m;
      d->mapped_bytes_ = bytes;
      d->base_ = static_cast<const unsigned char*>(m);
    }
    ::close(fd);
    // One pass for the largest id: an id at or above the vocabulary would index past the
    // embedding on some rank, far from the cause.
    std::int64_t largest = -1;
    for (std::int64_t i = 0; i < d->count_; ++i) {
      std::int64_t t = d->token_at(i);
      if (t >= vocabulary)
        return error::invalid_input(file, "data", "token " + std::to_string(i) + " has id " + std::to_string(t) +
                                    ", at or above the model's vocabulary of " + std::to_string(vocabulary));
      largest = std::max(largest, t);
    }
    d->vocabulary_ = static_cast<int>(largest + 1);
  }
  return split(std::move(d), source, sequence);
}

std::optional<error> token_dataset::tokenize(const std::string& file, const std::string& text,
                                             const config::tokenizer_source& tokenizer, int vocabulary) {
  auto t = tokenize_text(file, text, tokenizer);
  if (!t) return t.error();
  owned_ = std::move(t->ids);
  bpe_ = std::move(t->bpe);
  sentencepiece_ = std::move(t->sentencepiece);
  base_ = reinterpret_cast<const unsigned char*>(owned_.data());
  count_ = static_cast<std::int64_t>(owned_.size());
  vocabulary_ = t->vocabulary;
  const char* field = bpe_ ? "data.tokenizer.vocab" : "data.tokenizer.model";
  if (vocabulary_ > vocabulary)
    return error::invalid_input(t->origin, field, "the tokenizer has " + std::to_string(vocabulary_) +
                                " ids, more than the model's vocabulary of " + std::to_string(vocabulary));
  return std::nullopt;
}

result<std::shared_ptr<const token_dataset>> token_dataset::split(std::shared_ptr<token_dataset> d,
                                                                  const config::data_source& source, int sequence) {
  const std::string& file = d->path_;
  d->train_end_ = d->count_ - static_cast<std::int64_t>(source.validation_fraction * double(d->count_));
  const std::int64_t need = sequence + 2;  // one sample (sequence + 1) and one choice of offset
  if (d->train_end_ < need || (source.validation_fraction > 0 && d->count_ - d->train_end_ < need))
    return error::invalid_input(file, "data", "too short: " + std::to_string(d->count_) + " tokens, of which " +
                                std::to_string(d->train_end_) + " train and " +
                                std::to_string(d->count_ - d->train_end_) +
                                " validate; each part needs at least " + std::to_string(need) +
                                " (sequence " + std::to_string(sequence) + " + 2)");
  return std::shared_ptr<const token_dataset>(std::move(d));
}

std::int64_t token_dataset::token_at(std::int64_t i) const {
  const unsigned char* p = base_ + i * width_;
  if (width_ == 2) return static_cast<std::int64_t>(p[0] | (p[1] << 8));
  return static_cast<std::int64_t>(static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                                   (static_cast<std::uint32_t>(p[2]) << 16) |
                                   (static_cast<std::uint32_t>(p[3]) << 24));
}

std::int64_t token_dataset::tokens(data_split split) const {
  return split == data_split::train ? train_end_ : count_ - train_end_;
}

void token_dataset::fill(data_split split, std::uint64_t seed, std::int64_t first, int count,
                         std::int64_t* out) const {
  const std::int64_t begin = split == data_split::train ? 0 : train_end_;
  const std::int64_t offsets = tokens(split) - sequence_ - 1;  // >= 1 (checked at open)
  const std::uint64_t stream = split == data_split::train ? 0x7EA1 : 0x7A11D;
  for (int i = 0; i < count; ++i) {
    std::uint64_t r = mix_seed(mix_seed(seed, stream), static_cast<std::uint64_t>(first + i));
    std::int64_t at = begin + static_cast<std::int64_t>(r % static_cast<std::uint64_t>(offsets));
    std::int64_t* row = out + static_cast<std::int64_t>(i) * (sequence_ + 1);
    if (width_ == 4 && !owned_.empty()) {
      for (int t = 0; t <= sequence_; ++t) row[t] = owned_[static_cast<std::size_t>(at + t)];
    } else {
      for (int t = 0; t <= sequence_; ++t) row[t] = token_at(at + t);
    }
  }
}

result<std::vector<std::int64_t>> token_dataset::encode(const std::string& text) const {
  if (bpe_) return bpe_->encode(text);
  if (sentencepiece_) return sentencepiece_->encode(text);
  auto index = index_of(symbols_);
  std::vector<std::int64_t> out;
  for (const auto& p : code_points(text)) {
    auto it = index.find(p);
    if (it == index.end())
      return error::invalid_input(path_, "data", "the character '" + p + "' is not in the vocabulary built from the data");
    out.push_back(it->second);
  }
  return out;
}

std::string token_dataset::decode(const std::vector<std::int64_t>& ids) const {
  std::string out;
  if (bpe_) {
    for (auto id : ids)  // an id outside the vocabulary (none is sampled) stands for nothing
      if (auto piece = bpe_->decode({id})) out += *piece;
    return out;
  }
  if (sentencepiece_) {  // decoded whole: a piece's leading space depends on what precedes it
    std::vector<std::int64_t> known;
    for (auto id : ids)
      if (id >= 0 && id < vocabulary_) known.push_back(id);
    auto text = sentencepiece_->decode(known);
    return text ? *text : out;
  }
  for (auto id : ids)
    if (id >= 0 && id < static_cast<std::int64_t>(symbols_.size())) out += symbols_[id];
  return out;
}

std::string vocabulary_json(const std::vector<std::string>& symbols) {
  // A malformed byte of the text stands for itself: written as U+FFFD rather than refused.
  return nlohmann::json(symbols).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

result<std::vector<std::string>> parse_vocabulary_json(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    return j.get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return error::invalid_input("", std::string("a vocabulary is a JSON list of strings: ") + e.what());
  }
}

}  // namespace sailor::models
