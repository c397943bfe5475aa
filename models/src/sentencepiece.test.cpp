// A text job under SentencePiece: a tiny model trained here (no download), its ids and text,
// the ids tokenized once and kept next to the data, and the errors that name the model file.
#include <sailor/models/sentencepiece.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <sailor/models/token_data.hpp>

#include "temp_file.hpp"
#include "token_cache.hpp"

namespace {

namespace fs = std::filesystem;
using sailor::models::sentencepiece_tokenizer;
using sailor::models::token_dataset;

// A few KB of lines from a small alphabet (lower case, space, full stop), the same every run.
std::string sp_corpus_text() {
  const char* subjects[] = {"the cat", "a dog", "my friend", "the old man", "some birds"};
  const char* verbs[] = {"sees", "finds", "likes", "walks past", "talks to"};
  const char* objects[] = {"the river", "a green hat", "the tall tree", "her house", "the sea"};
  std::string text;
  for (int i = 0; i < 150; ++i)
    text += std::string(subjects[i % 5]) + " " + verbs[(i / 5) % 5] + " " + objects[(i / 25 + i) % 5] + ".\n";
  return text;
}

// The corpus in `dir` and a SentencePiece model trained on it with the library's own trainer:
// `vocabulary` pieces, identity normalization and no dummy prefix (its text comes back
// byte for byte), the newline a piece of its own (the trainer reads a line at a time).
std::string train_model(const sailor::testing::temp_dir& dir, const std::string& name,
                        const std::string& model_type, int vocabulary) {
  const std::string input = dir.write(name + "-input.txt", sp_corpus_text());
  const std::vector<std::pair<std::string, std::string>> args = {
    {"input", input},
    {"model_prefix", dir.path(name)},
    {"model_type", model_type},
    {"vocab_size", std::to_string(vocabulary)},
    {"character_coverage", "1.0"},
    {"normalization_rule_name", "identity"},
    {"add_dummy_prefix", "false"},
    {"remove_extra_whitespaces", "false"},
    {"user_defined_symbols", "\n"},
    {"num_threads", "1"},
    {"minloglevel", "2"},
  };
  const auto failed = sentencepiece_tokenizer::train(args);
  REQUIRE_MESSAGE(!failed, (failed ? failed->to_string() : ""));
  return dir.path(name + ".model");
}

struct sentencepiece_job {
  sailor::testing::temp_dir dir;
  sailor::config::data_source source;

  explicit sentencepiece_job(const std::string& model_type = "bpe") {
    source.path = dir.write("corpus.txt", sp_corpus_text());
    source.tokenizer.kind = sailor::config::tokenizer_kind::sentencepiece;
    source.tokenizer.model = train_model(dir, "tiny", model_type, 64);
  }

  // The token files kept next to the data.
  int kept() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir.root()))
      n += e.path().filename().string().rfind("corpus.txt.sentencepiece-", 0) == 0 ? 1 : 0;
    return n;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("tokens: a SentencePiece model (bpe and unigram) gives back the text of its ids") {
  // (The corpus has room for about 40 unigram pieces.)
  for (const auto& [type, pieces] : {std::pair{"bpe", 64}, std::pair{"unigram", 40}}) {
    INFO(type);
    sailor::testing::temp_dir dir;
    auto sp = sentencepiece_tokenizer::load(train_model(dir, "m", type, pieces));
    REQUIRE_MESSAGE(sp, (sp ? "" : sp.error().to_string()));
    CHECK(sp->vocabulary() == pieces);
    const std::string text = sp_corpus_text().substr(0, 400);
    auto ids = sp->encode(text);
    REQUIRE(ids);
    CHECK(ids->size() < text.size() * 3 / 4);  // pieces, not characters
    for (auto id : *ids) CHECK((id >= 0 && id < pieces));
    CHECK(*sp->decode(*ids) == text);
    // A sample without a prompt starts from a piece of text, not <unk>, <s> or </s>.
    CHECK(!sp->decode({sp->first_text_id()})->empty());
    CHECK(!sp->is_text(0));  // <unk>
    CHECK(sp->is_text(sp->first_text_id()));
    CHECK(!sp->decode({pieces}));
  }
}

TEST_CASE("tokens: a sentencepiece text job is tokenized once and read from the kept ids after") {
  sentencepiece_job job;
  auto first = token_dataset::open(job.source, 64, 16);
  REQUIRE_MESSAGE(first, (first ? "" : first.error().to_string()));
  CHECK((*first)->vocabulary() == 64);
  CHECK((*first)->decode(*(*first)->encode("the cat sees the sea.\n")) == "the cat sees the sea.\n");
  CHECK(job.kept() == 1);
  // The second time the ids come from the kept file, unchanged, and sample the same tokens.
  auto again = sailor::models::tokenize_text(job.source.path, sp_corpus_text(), job.source.tokenizer);
  REQUIRE(again);
  CHECK(again->from_cache);
  auto second = token_dataset::open(job.source, 64, 16);
  REQUIRE(second);
  CHECK(job.kept() == 1);
  CHECK((*second)->tokens(sailor::models::data_split::train) ==
        (*first)->tokens(sailor::models::data_split::train));
  std::vector<std::int64_t> a(4 * 17), b(4 * 17);
  (*first)->fill(sailor::models::data_split::train, 7, 0, 4, a.data());
  (*second)->fill(sailor::models::data_split::train, 7, 0, 4, b.data());
  CHECK(a == b);
  std::vector<std::int64_t> row(a.begin(), a.begin() + 17);
  CHECK(sp_corpus_text().find((*first)->decode(row)) != std::string::npos);
  // Another model is another key: its ids are kept beside the first model's.
  job.source.tokenizer.model = train_model(job.dir, "other", "unigram", 40);
  auto other = token_dataset::open(job.source, 64, 16);
  REQUIRE(other);
  CHECK((*other)->vocabulary() == 40);
  CHECK(job.kept() == 2);
}

TEST_CASE("tokens: a SentencePiece model that is missing, corrupt or larger than the model's vocabulary is named") {
  sentencepiece_job job;
  auto small = token_dataset::open(job.source, 40, 16);
  REQUIRE(!small);
  CHECK(small.error().to_string().find(job.source.tokenizer.model) != std::string::npos);
  CHECK(small.error().to_string().find("64") != std::string::npos);
  CHECK(small.error().field == "data.tokenizer.model");
  const std::string model_bytes = read_bytes(job.source.tokenizer.model);
  const std::map<std::string, std::string> bad_files = {
    {"none.model", ""},  // not written
    {"half.model", model_bytes.substr(0, model_bytes.size() / 2)},
    {"text.model", "this is not a model\n"},
  };
  for (const auto& [name, bytes] : bad_files) {
    INFO(name);
    job.source.tokenizer.model = bytes.empty() ? job.dir.path(name) : job.dir.write(name, bytes);
    auto bad = token_dataset::open(job.source, 64, 16);
    REQUIRE(!bad);
    CHECK(bad.error().to_string().find(job.dir.path(name)) != std::string::npos);
    CHECK(!sentencepiece_tokenizer::load(job.dir.path(name)));
  }
}
