// Byte-level BPE against encodings worked out by hand from a vocabulary made here.
#include "sailor/models/bpe.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "temp_file.hpp"

using sailor::models::gpt2_bpe;
using sailor::models::gpt2_byte_char;
using sailor::models::gpt2_char_byte;
using sailor::models::gpt2_pretokenize;

namespace {

// Ids 0..255: the bytes in byte order; then the merges' results.
const char* bpe_test_merges = "#version: 0.2\nĠ t\nh e\nĠt he\nc a\nca t\n";

std::string bpe_test_vocab() {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    v[gpt2_byte_char(static_cast<unsigned char>(b))] = b;
  v["Ġt"] = 256;
  v["he"] = 257;
  v["Ġthe"] = 258;
  v["ca"] = 259;
  v["cat"] = 260;
  return v.dump();
}

std::vector<std::string> pieces_of(const std::string& text) {
  std::vector<std::string> out;
  for (auto p : gpt2_pretokenize(text))
    out.emplace_back(p);
  return out;
}

}  // namespace

TEST_CASE("bpe: GPT-2's byte characters: printable bytes are themselves, the rest from U+0100") {
  CHECK(gpt2_byte_char('a') == "a");
  CHECK(gpt2_byte_char(' ') == "\u0120");   // Ġ
  CHECK(gpt2_byte_char('\n') == "\u010a");  // Ċ
  CHECK(gpt2_byte_char(0x7f) == "\u0121");
  CHECK(gpt2_byte_char(0xad) == "\u0143");
  for (int b = 0; b < 256; ++b)
    CHECK(gpt2_char_byte(gpt2_byte_char(static_cast<unsigned char>(b))) == b);
  CHECK(gpt2_char_byte("\u0200") == -1);
}

TEST_CASE("bpe: pre-tokenization splits as GPT-2's pattern does") {
  using v = std::vector<std::string>;
  CHECK(pieces_of("Hello world's  end\n\n") == v{"Hello", " world", "'s", " ", " end", "\n\n"});
  CHECK(pieces_of("I'm 42!") == v{"I", "'m", " 42", "!"});
  CHECK(pieces_of("x\ny") == v{"x", "\n", "y"});
  CHECK(pieces_of("they'll ... ok?") == v{"they", "'ll", " ...", " ok", "?"});
  CHECK(pieces_of("über café") == v{"über", " café"});
  CHECK(pieces_of("") == v{});
}

TEST_CASE("bpe: merges apply lowest rank first, every occurrence at once") {
  auto bpe = gpt2_bpe::parse(bpe_test_vocab(), bpe_test_merges);
  REQUIRE(bpe);
  CHECK(bpe->vocabulary() == 261);
  auto ids = bpe->encode("the cat sat");
  REQUIRE(ids);
  // "the": t + he; " cat": Ġ + (ca + t); " sat": no merge applies.
  CHECK(*ids == std::vector<std::int64_t>{'t', 257, ' ', 260, ' ', 's', 'a', 't'});
  auto the = bpe->encode(" the");
  REQUIRE(the);
  CHECK(*the == std::vector<std::int64_t>{258});  // Ġ t -> Ġt, h e -> he, Ġt he -> Ġthe
}

TEST_CASE("bpe: any bytes round-trip, and an unknown id is refused") {
  auto bpe = gpt2_bpe::parse(bpe_test_vocab(), bpe_test_merges);
  REQUIRE(bpe);
  const std::string text = "héllo \xf0\x9f\x9a\x80 wörld\t\r\n ¿qué? the cat\xff\n";
  auto ids = bpe->encode(text);
  REQUIRE(ids);
  auto back = bpe->decode(*ids);
  REQUIRE(back);
  CHECK(*back == text);
  auto bad = bpe->decode({5, 999});
  REQUIRE(!bad);
  CHECK(bad.error().to_string().find("999") != std::string::npos);
}

TEST_CASE("bpe: the files are read, and a bad merges line is named") {
  sailor::testing::temp_dir dir;
  const auto vocab = dir.write("vocab.json", bpe_test_vocab());
  auto bpe = gpt2_bpe::load(vocab, dir.write("merges.txt", bpe_test_merges));
  REQUIRE(bpe);
  CHECK(*bpe->encode(" the") == std::vector<std::int64_t>{258});
  auto bad = gpt2_bpe::load(vocab, dir.write("bad.txt", "#version: 0.2\nĠ t\nhe\n"));
  REQUIRE(!bad);
  const auto message = bad.error().to_string();
  CHECK(message.find("bad.txt") != std::string::npos);
  CHECK(message.find("line 3") != std::string::npos);
  auto missing = gpt2_bpe::load(dir.path("none.json"), dir.path("merges.txt"));
  REQUIRE(!missing);
  CHECK(missing.error().to_string().find("none.json") != std::string::npos);
}
