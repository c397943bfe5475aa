// `sailor export`'s library side: a checkpoint written by a pipeline plan (shards of two
// stages, TP 2 on one) becomes one safetensors file with Hugging Face's names and a
// config.json; Debian's python3-torch reads both back with the family's own forward
// (scripts/hf_forward.py, written from Hugging Face's definitions) and continues a prompt
// exactly as our greedy generation does; the file read back by generate_tokens_exported gives
// the same continuation.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/executor.hpp>
#include <sailor/train/export.hpp>
#include <sailor/models/shapes.hpp>

#include "rank_threads.hpp"
#include "run_command.hpp"
#include "temp_file.hpp"
#include "tiny_plans.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_export {

namespace {

using namespace sailor;
using sailor::testing::make_plan;
using sailor::testing::stage;

// Trains `model` 4 iterations on a two-stage plan, checkpointing after the last.
void train_with_checkpoint(const config::model_shape& model, const std::string& dir) {
  auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  options.checkpoint_dir = dir;
  options.checkpoint_every = 4;
  auto errors = sailor::testing::run_rank_threads(
      model, make_plan({stage(0, 3, {2}), stage(3, 3, {1})}), options,
      [](int, train::stage_executor& exec) -> std::string {
        for (int it = 0; it < 4; ++it)
          if (auto tel = exec.run_iteration(it); !tel) return tel.error().to_string();
        auto st = exec.flush_checkpoints();
        return st ? st->to_string() : std::string();
      });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_family(config::model_shape model, const char* model_type, int tensors) {
  sailor::testing::temp_dir dir;
  train_with_checkpoint(model, dir.path("ckpt"));
  auto written = train::export_safetensors(model, dir.path("ckpt"), 0, dir.path("model.safetensors"));
  REQUIRE_MESSAGE(written, (written ? "" : written.error().to_string()));
  CHECK(*written == tensors);
  auto config = slurp(dir.path("config.json"));
  CHECK(config.find(std::string("\"model_type\": \"") + model_type + "\"") != std::string::npos);

  const std::vector<std::int64_t> prompt = {3, 14, 15, 9, 26, 5};
  train::generation_options greedy;
  greedy.temperature = 0;
  greedy.tokens = 12;
  auto ours = train::generate_tokens(model, dir.path("ckpt"), 0, prompt, greedy);
  REQUIRE_MESSAGE(ours, (ours ? "" : ours.error().to_string()));
  // The exported file alone gives the same model back (sailor generate on an exported folder).
  auto back = train::generate_tokens_exported(model, dir.path("model.safetensors"), prompt, greedy);
  REQUIRE_MESSAGE(back, (back ? "" : back.error().to_string()));
  CHECK(*back == *ours);
  std::string want = "[";
  for (std::size_t i = 0; i < ours->size(); ++i) want += (i ? ", " : "") + std::to_string((*ours)[i]);
  want += "]";
  auto r = sailor::testing::run_command("/usr/bin/python3 " + std::string(SAILOR_SOURCE_DIR) +
                                            "/scripts/hf_forward.py " + dir.path("model.safetensors") + " " +
                                            dir.path("config.json") + " 3,14,15,9,26,5 12",
                                        120);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out == want + "\n");
}

}  // namespace

TEST_CASE("export: a GPT-2 with a tied head and no biases reads back as GPT2LMHeadModel") {
  auto model = models::tiny_gpt_shape();
  model.tied_embeddings = true;
  model.bias = false;
  // wte, wpe, ln_f (2), 12 per block; no lm_head (tied).
  check_family(model, "gpt2", 4 + 12 * model.num_layers);
}

TEST_CASE("export: a GPT-2 with Hugging Face's gelu_new reads back as GPT2LMHeadModel") {
  auto model = models::tiny_gpt_shape();
  model.gelu_tanh = true;  // config.json says gelu_new: hf_forward.py takes the tanh GELU
  check_family(model, "gpt2", 5 + 12 * model.num_layers);
}

TEST_CASE("export: an OPT reads back as OPTForCausalLM") {
  auto model = models::tiny_opt_shape();
  // embed_tokens, embed_positions, final norm (2), lm_head; 16 per block.
  check_family(model, "opt", 5 + 16 * model.num_layers);
}

TEST_CASE("export: an OPT without biases reads back as OPTForCausalLM, its biases zeros") {
  auto model = models::tiny_opt_shape();
  model.bias = false;  // sailor train trains such a model; its export had no biases to write
  check_family(model, "opt", 5 + 16 * model.num_layers);
}

TEST_CASE("export: a Llama with grouped-query attention reads back as LlamaForCausalLM") {
  auto model = models::tiny_llama_shape();
  // embed_tokens, norm, lm_head; 9 per block.
  check_family(model, "llama", 3 + 9 * model.num_layers);
}

// The command line: a text job writes its vocabulary next to its checkpoints; `sailor
// generate` continues a prompt from it and `sailor export` writes the file.
TEST_CASE("export: sailor export and sailor generate on a text job's checkpoint") {
  sailor::testing::temp_dir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be, ";
  auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  options.checkpoint_dir = dir.path("ckpt");
  options.checkpoint_every = 3;
  config::data_source data;
  data.path = dir.write("corpus.txt", text);
  options.data = data;
  auto model = models::tiny_gpt_shape();
  auto errors = sailor::testing::run_rank_threads(
      model, make_plan({stage(0, 6, {1})}), options, [](int, train::stage_executor& exec) -> std::string {
        for (int it = 0; it < 3; ++it)
          if (auto tel = exec.run_iteration(it); !tel) return tel.error().to_string();
        auto st = exec.flush_checkpoints();
        return st ? st->to_string() : std::string();
      });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  const std::string model_file = dir.write("tiny.yaml",
      "name: tiny-gpt\nlayers: 4\nhidden: 32\nheads: 4\nsequence: 16\nvocabulary: 64\ndtype: fp32\n");
  auto gen = sailor::testing::run_command(sailor::testing::sailor_bin() + " generate --checkpoint " +
                                              dir.path("ckpt") + " --model " + model_file +
                                              " --prompt 'to be' --tokens 30 --seed 3");
  REQUIRE_MESSAGE(gen.exit_code == 0, gen.err);
  REQUIRE(gen.out.size() == std::string("to be").size() + 30 + 1);
  CHECK(gen.out.rfind("to be", 0) == 0);
  for (char c : gen.out.substr(5, 30)) CHECK(std::string("to ber,n").find(c) != std::string::npos);
  auto bad = sailor::testing::run_command(sailor::testing::sailor_bin() + " generate --checkpoint " +
                                              dir.path("ckpt") + " --model " + model_file + " --prompt 'xyz'");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("'x' is not in") != std::string::npos);
  auto ex = sailor::testing::run_command(sailor::testing::sailor_bin() + " export --checkpoint " +
                                             dir.path("ckpt") + " --model " + model_file + " --out " +
                                             dir.path("out.safetensors"));
  REQUIRE_MESSAGE(ex.exit_code == 0, ex.err);
  CHECK(ex.out.find("wrote 53 tensors") != std::string::npos);
  CHECK(std::filesystem::file_size(dir.path("out.safetensors")) > 4 * static_cast<std::uintmax_t>(model.total_params()));
}

TEST_CASE("export: a folder without a checkpoint is refused, naming it") {
  sailor::testing::temp_dir dir;
  auto r = train::export_safetensors(models::tiny_gpt_shape(), dir.path("none"), 0, dir.path("m.safetensors"));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(dir.path("none")) != std::string::npos);
}

}  // namespace integration_train_export
#endif  // __has_include(<sailor/models/shapes.hpp>)
