// A text job under GPT-2's BPE: tokenized once, kept next to the data, the same ids again.
#include "token_cache.hpp"

#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include <sailor/models/token_data.hpp>

#include "temp_file.hpp"

namespace {

// The 256 byte characters in byte order, then "Ġt", "he", "Ġthe".
struct bpe_files {
  sailor::testing::temp_dir dir;
  sailor::config::data_source source;

  explicit bpe_files(const std::string& text) {
    nlohmann::json v = nlohmann::json::object();
    for (int b = 0; b < 256; ++b)
      v[sailor::models::gpt2_byte_char(static_cast<unsigned char>(b))] = b;
    v["Ġt"] = 256;
    v["he"] = 257;
    v["Ġthe"] = 258;
    source.path = dir.write("corpus.txt", text);
    source.tokenizer = {sailor::config::tokenizer_kind::gpt2_bpe, dir.write("vocab.json", v.dump()),
                        dir.write("merges.txt", "#version: 0.2\nĠ t\nh e\nĠt he\n")};
  }
};

std::string corpus_text() {
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the cat and the hat.\nthey said:  the end  \n\nof " + std::to_string(i) + "\n";
  return text;
}

}  // namespace

TEST_CASE("tokens: a text's chunks end where the pre-tokenizer starts a piece, so their ids are the whole's") {
  const std::string text = corpus_text();
  auto chunks = sailor::models::text_chunks(text, 100);
  CHECK(chunks.size() > 10);
  std::string joined;
  for (auto c : chunks)
    joined += c;
  CHECK(joined == text);
  bpe_files files(text);
  auto whole = sailor::models::tokenize_text(files.source.path, "", files.source.tokenizer);
  REQUIRE(whole);
  auto bpe = whole->bpe;
  std::vector<std::int64_t> pieces;
  for (auto c : chunks) {
    auto ids = bpe->encode(c);
    REQUIRE(ids);
    pieces.insert(pieces.end(), ids->begin(), ids->end());
  }
  CHECK(pieces == *bpe->encode(text));
}

TEST_CASE("tokens: a gpt2_bpe text job is tokenized once and read from the kept ids after") {
  const std::string text = corpus_text();
  bpe_files files(text);
  auto first = sailor::models::token_dataset::open(files.source, 300, 16);
  REQUIRE_MESSAGE(first, (first ? "" : first.error().to_string()));
  CHECK((*first)->vocabulary() == 259);
  CHECK((*first)->decode(*(*first)->encode("the cat")) == "the cat");
  CHECK(*(*first)->encode(" the") == std::vector<std::int64_t>{258});
  // The ids are kept next to the data; a second open reads them and samples the same tokens.
  int kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(files.dir.path("")))
    kept += e.path().filename().string().find("corpus.txt.gpt2_bpe-") == 0 ? 1 : 0;
  CHECK(kept == 1);
  auto second = sailor::models::token_dataset::open(files.source, 300, 16);
  REQUIRE(second);
  CHECK((*second)->tokens(sailor::models::data_split::train) ==
        (*first)->tokens(sailor::models::data_split::train));
  std::vector<std::int64_t> a(4 * 17), b(4 * 17);
  (*first)->fill(sailor::models::data_split::train, 7, 0, 4, a.data());
  (*second)->fill(sailor::models::data_split::train, 7, 0, 4, b.data());
  CHECK(a == b);
  // Every sampled sequence decodes to a part of the text.
  std::vector<std::int64_t> row(a.begin(), a.begin() + 17);
  CHECK(text.find((*first)->decode(row)) != std::string::npos);
}

TEST_CASE("tokens: a tokenizer larger than the model's vocabulary, or a missing file, is named") {
  bpe_files files(corpus_text());
  auto small = sailor::models::token_dataset::open(files.source, 200, 16);
  REQUIRE(!small);
  CHECK(small.error().to_string().find("vocab.json") != std::string::npos);
  CHECK(small.error().to_string().find("259") != std::string::npos);
  files.source.tokenizer.merges = files.dir.path("none.txt");
  auto missing = sailor::models::token_dataset::open(files.source, 300, 16);
  REQUIRE(!missing);
  CHECK(missing.error().to_string().find("none.txt") != std::string::npos);
}
