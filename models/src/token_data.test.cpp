#include <sailor/models/token_data.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace sailor;

// A file under the temporary folder, removed at the end of the test.
struct temp_data {
  std::string path;
  explicit temp_data(const std::string& name)
      : path((std::filesystem::temp_directory_path() /
              ("sailor-data-" + std::to_string(::getpid()) + "-" + name)).string()) {}
  ~temp_data() { std::remove(path.c_str()); }
  void write(const std::string& bytes) const { std::ofstream(path, std::ios::binary) << bytes; }
};

config::data_source source(const std::string& path, config::data_format f, double val = 0.1) {
  config::data_source s;
  s.path = path;
  s.format = f;
  s.validation_fraction = val;
  return s;
}

std::string u16(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    out.push_back(static_cast<char>(id & 0xFF));
    out.push_back(static_cast<char>(id >> 8));
  }
  return out;
}

}  // namespace

TEST_CASE("data: text is read with a character-level tokenizer built from the file") {
  temp_data f("text.txt");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "To be, or not to be: that is the question. é\n";
  f.write(text);
  auto d = models::token_dataset::open(source(f.path, config::data_format::text), 64, 8);
  REQUIRE_MESSAGE(d, (d ? "" : d.error().to_string()));
  const auto& data = **d;
  // Distinct code points in code-point order; the two-byte 'é' is one symbol, last.
  CHECK(data.vocabulary() == 19);
  CHECK(data.symbols().front() == "\n");
  CHECK(data.symbols().back() == "é");
  auto ids = data.encode("to be é");
  REQUIRE(ids);
  CHECK(data.decode(*ids) == "to be é");
  CHECK_FALSE(data.encode("xyz"));
  const std::int64_t total = data.tokens(models::data_split::train) + data.tokens(models::data_split::validation);
  CHECK(total == 40 * 45);
  CHECK(data.tokens(models::data_split::validation) == total / 10);
  // A sample is 9 consecutive characters of the text, from (seed, index) alone.
  std::vector<std::int64_t> a(9), b(9), c(9);
  data.fill(models::data_split::train, 7, 123, 1, a.data());
  data.fill(models::data_split::train, 7, 123, 1, b.data());
  data.fill(models::data_split::train, 8, 123, 1, c.data());
  CHECK(a == b);
  CHECK(a != c);
  CHECK(text.find(data.decode(a)) != std::string::npos);
  auto vocab = models::parse_vocabulary_json(models::vocabulary_json(data.symbols()));
  REQUIRE(vocab);
  CHECK(*vocab == data.symbols());
}

TEST_CASE("data: token files are little-endian ids, validation samples come from the tail") {
  temp_data f("tokens.u16");
  std::vector<int> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(i < 900 ? i % 300 : 300 + i % 50);  // tail: 300..349
  f.write(u16(ids));
  auto d = models::token_dataset::open(source(f.path, config::data_format::tokens_u16), 512, 16);
  REQUIRE_MESSAGE(d, (d ? "" : d.error().to_string()));
  CHECK((*d)->vocabulary() == 350);
  CHECK((*d)->tokens(models::data_split::train) == 900);
  std::vector<std::int64_t> rows(17 * 20);
  (*d)->fill(models::data_split::validation, 1, 0, 20, rows.data());
  for (auto t : rows) CHECK(t >= 300);
  (*d)->fill(models::data_split::train, 1, 0, 20, rows.data());
  for (auto t : rows) CHECK(t < 300);

  temp_data g("tokens.u32");
  std::string bytes;
  for (int i = 0; i < 100; ++i) bytes += std::string("\x01\x00\x01\x00", 4);  // id 65537
  g.write(bytes);
  auto e = models::token_dataset::open(source(g.path, config::data_format::tokens_u32, 0.2), 70000, 8);
  REQUIRE_MESSAGE(e, (e ? "" : e.error().to_string()));
  std::vector<std::int64_t> row(9);
  (*e)->fill(models::data_split::train, 1, 5, 1, row.data());
  CHECK(row[0] == 65537);
}

TEST_CASE("data: bad data files are refused with the file and the fault named") {
  auto message = [](const result<std::shared_ptr<const models::token_dataset>>& r) {
    REQUIRE_FALSE(r);
    return r.error().to_string();
  };
  auto missing = message(models::token_dataset::open(source("/nonexistent/corpus.txt", config::data_format::text), 64, 8));
  CHECK(missing.find("/nonexistent/corpus.txt") != std::string::npos);
  CHECK(missing.find("cannot open") != std::string::npos);

  temp_data odd("odd.u16");
  odd.write(std::string(101, '\0'));
  auto width = message(models::token_dataset::open(source(odd.path, config::data_format::tokens_u16), 64, 8));
  CHECK(width.find(odd.path) != std::string::npos);
  CHECK(width.find("not a multiple of 2 bytes") != std::string::npos);

  temp_data big("big.u16");
  std::vector<int> ids(200, 3);
  ids[150] = 64;
  big.write(u16(ids));
  auto vocab = message(models::token_dataset::open(source(big.path, config::data_format::tokens_u16), 64, 8));
  CHECK(vocab.find("token 150 has id 64") != std::string::npos);
  CHECK(vocab.find("vocabulary of 64") != std::string::npos);

  temp_data wide("wide.txt");
  std::string alphabet;
  for (char c = 'A'; c <= 'z'; ++c) alphabet += c;
  wide.write(alphabet + alphabet + alphabet);
  auto chars = message(models::token_dataset::open(source(wide.path, config::data_format::text), 32, 8));
  CHECK(chars.find("58 distinct characters, more than the model's vocabulary of 32") != std::string::npos);

  temp_data tiny("tiny.txt");
  tiny.write("hello world, hello");
  auto shortish = message(models::token_dataset::open(source(tiny.path, config::data_format::text), 64, 16));
  CHECK(shortish.find(tiny.path) != std::string::npos);
  CHECK(shortish.find("too short") != std::string::npos);
}
