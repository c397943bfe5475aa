// The training fields of model and job files: the block family, the data, the schedule.
#include "sailor/config/load.hpp"

#include <doctest/doctest.h>

#include <utility>

#include "error_of.hpp"
#include "temp_file.hpp"

using namespace sailor;
using namespace sailor::config;
using sailor::testing::error_of;

TEST_CASE("models: the architecture sets its family's defaults") {
  testing::temp_dir dir;
  const std::string base = "name: m\nlayers: 2\nhidden: 64\nheads: 4\nsequence: 32\nvocabulary: 100\n";
  auto gpt = load_model(dir.write("gpt.yaml", base));
  REQUIRE(gpt);
  CHECK(gpt->arch == architecture::gpt2);
  CHECK(gpt->bias);
  CHECK(gpt->learned_positions);
  CHECK_FALSE(gpt->gelu_tanh);
  auto gpt2 = load_model(dir.write("gpt2.yaml", base + "activation: gelu_new\n"));
  REQUIRE(gpt2);
  CHECK(gpt2->gelu_tanh);
  CHECK(error_of(load_model(dir.write("relu.yaml", base + "activation: relu\n"))).field == "activation");
  auto llama = load_model(dir.write("llama.yaml", base + "architecture: llama\nkv_heads: 2\nrope_theta: 500000\n"));
  REQUIRE(llama);
  CHECK(llama->arch == architecture::llama);
  CHECK_FALSE(llama->bias);
  CHECK(llama->gated_mlp);
  CHECK_FALSE(llama->learned_positions);
  CHECK(llama->rope_theta == 500000);
  auto opt = load_model(dir.write("opt.yaml", base + "architecture: opt\n"));
  REQUIRE(opt);
  CHECK(opt->position_rows() == 34);
  auto bad = error_of(load_model(dir.write("bad.yaml", base + "architecture: mamba\n")));
  CHECK(bad.field == "architecture");
  CHECK(bad.line == 7);
  auto shipped = load_model(sailor::testing::configs_dir() + "/models/llama-3-8b.yaml");
  REQUIRE(shipped);
  CHECK(shipped->arch == architecture::llama);
  CHECK_FALSE(shipped->bias);
}

TEST_CASE("jobs: data, validation and the optimizer schedule") {
  testing::temp_dir dir;
  const std::string base = "global_batch: 12\n";
  auto plain = load_job(dir.write("plain.yaml", base));
  REQUIRE(plain);
  CHECK_FALSE(plain->data);
  CHECK(plain->schedule.lr == 1e-3);
  CHECK(plain->init_from.empty());
  auto tuned = load_job(dir.write("tuned.yaml", base + "init_from: models/gpt2\n"));
  REQUIRE(tuned);
  CHECK(tuned->init_from == "models/gpt2");
  auto full = load_job(dir.write("full.yaml", base + R"(data: {path: corpus.txt, format: tokens-u16, validation_fraction: 0.05}
eval_every: 250
eval_batches: 20
lr: 1.0e-3
min_lr: 1.0e-4
warmup_iterations: 100
decay_iterations: 2000
betas: [0.9, 0.99]
weight_decay: 0.1
grad_clip: 1.0
)"));
  REQUIRE_MESSAGE(full, (full ? "" : full.error().to_string()));
  REQUIRE(full->data);
  CHECK(full->data->path == "corpus.txt");
  CHECK(full->data->format == data_format::tokens_u16);
  CHECK(full->data->validation_fraction == 0.05);
  CHECK(full->eval_every == 250);
  CHECK(full->eval_batches == 20);
  CHECK(full->schedule.min_lr == 1e-4);
  CHECK(full->schedule.warmup_iterations == 100);
  CHECK(full->schedule.decay_iterations == 2000);
  CHECK(full->schedule.beta2 == 0.99);
  CHECK(full->schedule.weight_decay == 0.1);
  CHECK(full->data->tokenizer.kind == tokenizer_kind::characters);
  auto bpe = load_job(dir.write("bpe.yaml", base + "data:\n  path: corpus.txt\n  tokenizer: "
                                            "{kind: gpt2_bpe, vocab: v.json, merges: m.txt}\n"));
  REQUIRE_MESSAGE(bpe, (bpe ? "" : bpe.error().to_string()));
  CHECK(bpe->data->tokenizer.kind == tokenizer_kind::gpt2_bpe);
  CHECK(bpe->data->tokenizer.vocab == "v.json");
  CHECK(bpe->data->tokenizer.merges == "m.txt");
  auto sp = load_job(dir.write("sp.yaml", base + "data:\n  path: corpus.txt\n  tokenizer: "
                                          "{kind: sentencepiece, model: corpus.model}\n"));
  REQUIRE_MESSAGE(sp, (sp ? "" : sp.error().to_string()));
  CHECK(sp->data->tokenizer.kind == tokenizer_kind::sentencepiece);
  CHECK(sp->data->tokenizer.model == "corpus.model");

  // Each bad setting is refused, naming its field.
  const std::pair<const char*, const char*> bad_settings[] = {
    {"data: {path: x, format: csv}\n", "data.format"},
    {"data: {path: x, validation_fraction: 1.5}\n", "data.validation_fraction"},
    {"data: {format: text}\n", "data.path"},
    {"data: {path: x, tokenizer: {kind: wordpiece}}\n", "data.tokenizer.kind"},
    {"data: {path: x, tokenizer: {vocab: v.json}}\n", "data.tokenizer.kind"},
    {"data: {path: x, tokenizer: {kind: gpt2_bpe, vocab: v.json}}\n", "data.tokenizer.merges"},
    {"data: {path: x, format: tokens-u16, tokenizer: {kind: gpt2_bpe, vocab: v, merges: m}}\n",
     "data.tokenizer"},
    {"data: {path: x, tokenizer: {kind: sentencepiece}}\n", "data.tokenizer.model"},
    {"data: {path: x, tokenizer: {kind: sentencepiece, model: m, vocab: v}}\n", "data.tokenizer"},
    {"data: {path: x, tokenizer: {kind: gpt2_bpe, vocab: v, merges: m, model: s}}\n", "data.tokenizer"},
    {"data: {path: x, format: tokens-u32, tokenizer: {kind: sentencepiece, model: m}}\n",
     "data.tokenizer"},
    {"eval_every: 10\n", "eval_every"},
    {"init_from: \"\"\n", "init_from"},
    {"lr: 1.0e-4\nmin_lr: 1.0e-3\n", "min_lr"},
    {"betas: [0.9, 1.2]\n", "betas[1]"},
  };
  for (const auto& [setting, field] : bad_settings) {
    INFO(setting);
    CHECK(error_of(load_job(dir.write("bad.yaml", base + setting))).field == field);
  }
}
