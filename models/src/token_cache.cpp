// A text tokenized once (see token_cache.hpp).
#include "token_cache.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sailor/config/log.hpp>

namespace sailor::models {
namespace {

namespace fs = std::filesystem;

bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

result<std::string> slurp(const std::string& path, const char* field) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return sailor::error::not_found(path, std::string("data.tokenizer.") + field, "cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::uint32_t> read_ids(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint32_t> ids;
  if (!in)
    return ids;
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<std::size_t>(in.tellg());
  if (bytes % 4 != 0)
    return ids;
  in.seekg(0);
  ids.resize(bytes / 4);
  in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(bytes));
  if (!in)
    ids.clear();
  return ids;
}

// Writes `ids` to `path` through a temporary name; false when the folder is not writable.
bool write_ids(const std::string& path, const std::vector<std::uint32_t>& ids) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return false;
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
    if (!out)
      return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    fs::remove(tmp, ec);
  return !ec;
}

}  // namespace

std::vector<std::string_view> text_chunks(std::string_view text, std::size_t chunk_bytes) {
  std::vector<std::string_view> chunks;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.size();
    for (std::size_t p = begin + std::max<std::size_t>(chunk_bytes, 2); p < text.size(); ++p) {
      const auto before = static_cast<unsigned char>(text[p - 2]);
      const auto after = static_cast<unsigned char>(text[p]);
      if (text[p - 1] == '\n' && before < 0x80 && !ascii_space(text[p - 2]) && after < 0x80 &&
          !ascii_space(text[p])) {
        end = p;
        break;
      }
    }
    chunks.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return chunks;
}

namespace {

// The tokenizer `tokenizer` names, loaded into `out`, and the hash of its files' bytes after
// `h` (the text's).
result<std::uint64_t> load_tokenizer(const config::tokenizer_source& tokenizer, std::uint64_t h,
                                     tokenized_text& out) {
  if (tokenizer.kind == config::tokenizer_kind::sentencepiece) {
    auto model = slurp(tokenizer.model, "model");
    if (!model)
      return model.error();
    auto sp = sentencepiece_tokenizer::parse(*model, tokenizer.model);
    if (!sp)
      return sp.error();
    out.sentencepiece = std::make_shared<const sentencepiece_tokenizer>(std::move(*sp));
    out.vocabulary = out.sentencepiece->vocabulary();
    out.origin = tokenizer.model;
    return fnv1a(h, *model);
  }
  auto vocab = slurp(tokenizer.vocab, "vocab");
  if (!vocab)
    return vocab.error();
  auto merges = slurp(tokenizer.merges, "merges");
  if (!merges)
    return merges.error();
  auto bpe = gpt2_bpe::load(tokenizer.vocab, tokenizer.merges);
  if (!bpe)
    return bpe.error();
  out.bpe = std::make_shared<const gpt2_bpe>(std::move(*bpe));
  out.vocabulary = out.bpe->vocabulary();
  out.origin = tokenizer.vocab;
  return fnv1a(fnv1a(h, *vocab), *merges);
}

result<std::vector<std::int64_t>> encode_chunk(const tokenized_text& t, std::string_view chunk) {
  return t.sentencepiece ? t.sentencepiece->encode(chunk) : t.bpe->encode(chunk);
}

// Encodes `text` chunk by chunk into out.ids, logging the progress.
status encode_all(const std::string& file, const std::string& text, tokenized_text& out) {
  auto log = log::get("data");
  const auto chunks = text_chunks(text, std::max<std::size_t>(text.size() / 10, 1 << 16));
  std::size_t done = 0;
  for (auto chunk : chunks) {
    auto ids = encode_chunk(out, chunk);
    if (!ids)
      return sailor::error::invalid_input(out.origin, "data.tokenizer", ids.error().message);
    out.ids.insert(out.ids.end(), ids->begin(), ids->end());
    done += chunk.size();
    log->info("tokenizing {} with {}: {:.0f}% ({} tokens)", file, out.origin,
              100.0 * static_cast<double>(done) / static_cast<double>(text.size()), out.ids.size());
  }
  return {};
}

}  // namespace

result<tokenized_text> tokenize_text(const std::string& file, const std::string& text,
                                     const config::tokenizer_source& tokenizer) {
  tokenized_text out;
  auto h = load_tokenizer(tokenizer, fnv1a(0xcbf29ce484222325ULL, text), out);
  if (!h)
    return h.error();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*h));
  out.cache_file = file + "." + config::to_string(tokenizer.kind) + "-" + hex + ".u32";
  auto log = log::get("data");
  if (fs::exists(out.cache_file) && !(out.ids = read_ids(out.cache_file)).empty()) {
    out.from_cache = true;
    log->info("{}: {} tokens from {}", file, out.ids.size(), out.cache_file);
    return out;
  }
  if (auto err = encode_all(file, text, out))
    return *err;
  if (!write_ids(out.cache_file, out.ids)) {
    log->warn("cannot keep the tokens in {} (its folder is not writable): tokenizing again next time",
              out.cache_file);
    out.cache_file.clear();
  }
  return out;
}

}  // namespace sailor::models
