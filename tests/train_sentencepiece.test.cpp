// A text job under a SentencePiece tokenizer (issue 42, item 2), end to end: `sailor train`
// tokenizes the text once next to it, keeps the tokenizer with the model, and `sailor
// generate` decodes its samples with it. The model is trained here (no download).

// Built only with LibTorch (the nodes train).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <sailor/models/sentencepiece.hpp>

#include "run_command.hpp"
#include "temp_file.hpp"
#include "word_corpus.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_sentencepiece {

using namespace sailor::testing;
namespace fs = std::filesystem;

TEST_CASE("sailor train on a sentencepiece text job keeps its tokenizer, and generate decodes with it") {
  temp_dir dir;
  const std::string corpus = word_corpus(12000);
  const auto data = dir.write("corpus.txt", corpus);
  // Identity normalization and the newline a piece: the samples are the corpus's characters.
  const auto trained = sailor::models::sentencepiece_tokenizer::train(
    {{"input", data}, {"model_prefix", dir.path("spm")}, {"model_type", "bpe"}, {"vocab_size", "40"},
     {"character_coverage", "1.0"}, {"normalization_rule_name", "identity"}, {"add_dummy_prefix", "false"},
     {"remove_extra_whitespaces", "false"}, {"user_defined_symbols", "\n"}, {"minloglevel", "2"}});
  REQUIRE_MESSAGE(!trained, (trained ? trained->to_string() : ""));
  const auto job = dir.write("job.yaml", "global_batch: 8\nobjective: max_throughput\noptimizer: adamw\n"
                                         "mixed_precision: false\nallow_recompute: false\nseed: 5\niterations: 4\n"
                                         "data: {path: " + data + ", format: text, tokenizer: {kind: sentencepiece, "
                                         "model: " + dir.path("spm.model") + "}}\nlr: 3.0e-3\n");
  const auto model = dir.write("model.yaml", "name: tiny-spm\narchitecture: gpt2\nlayers: 2\nhidden: 32\nheads: 4\n"
                                             "ffn_hidden: 64\nsequence: 16\nvocabulary: 48\nbias: false\n"
                                             "tied_embeddings: true\ndtype: fp32\n");
  const auto run = dir.path("run");
  auto r = run_command(sailor_bin() + " train --model " + model + " --job " + job +
                         " --nodes 1 --planner even --no-dashboard --sample-tokens 0 --out " + run, 200);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  int kept = 0;
  for (const auto& e : fs::directory_iterator(dir.root()))
    kept += e.path().filename().string().rfind("corpus.txt.sentencepiece-", 0) == 0 ? 1 : 0;
  CHECK(kept == 1);
  CHECK(fs::is_regular_file(run + "/model/tokenizer.model"));
  CHECK(!fs::exists(run + "/model/vocab.json"));

  // Greedy pieces after the prompt, decoded to the corpus's characters.
  auto gen = run_command(sailor_bin() + " generate " + run + " --prompt 'the king ' --tokens 12 --temperature 0", 60);
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  CHECK(gen.out.rfind("the king ", 0) == 0);
  REQUIRE(gen.out.size() > std::string("the king \n").size());
  for (char c : gen.out.substr(9, gen.out.size() - 10)) CHECK_MESSAGE(corpus.find(c) != std::string::npos, c);
  // The exported model's folder alone gives the same sample.
  auto alone = run_command(sailor_bin() + " generate " + run + "/model --prompt 'the king ' --tokens 12 --temperature 0", 60);
  CHECK_MESSAGE(alone.exit_code == 0, alone.err);
  CHECK(alone.out == gen.out);
}

}  // namespace integration_train_sentencepiece

#endif
