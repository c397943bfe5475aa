// `sailor export` and `sailor generate`: a trained model out of its checkpoint.
//
//   sailor export --checkpoint DIR --model M.yaml --out FILE.safetensors [--iteration N]
//   sailor generate --checkpoint DIR --model M.yaml --prompt TEXT [--tokens N]
//                   [--temperature T] [--top-k K] [--seed S] [--iteration N]
//
// Both read the checkpoint of any plan as a one-rank plan would restore it (the latest
// unless --iteration is given). export writes safetensors with Hugging Face's names and a
// config.json beside it; generate samples text on the CPU with the character vocabulary a
// text job wrote next to its checkpoints (DIR/vocab.json). The checkpoint records the
// model's sizes but not its family: --model names the model file it was trained with.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sailor/config/load.hpp"

#if defined(SAILOR_WITH_TRAIN)
#include "sailor/actors/train/export.hpp"
#include "sailor/models/token_data.hpp"
#endif

namespace sailor::app {

#if defined(SAILOR_WITH_TRAIN)
namespace {

struct export_options {
  std::string checkpoint, model, out, prompt;
  int iteration = 0;
  train::generation_options generation;
};

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "sailor %s: %s\n", command, message.c_str());
  return 1;
}

int run_export(const export_options& o) {
  auto model = config::load_model(o.model);
  if (!model) return fail("export", model.error().to_string());
  auto written = train::export_safetensors(*model, o.checkpoint, o.iteration, o.out);
  if (!written) return fail("export", written.error().to_string());
  std::printf("wrote %d tensors of %s (%s) to %s and config.json beside it\n", *written,
              model->name.c_str(), config::to_string(model->arch), o.out.c_str());
  return 0;
}

int run_generate(const export_options& o) {
  auto model = config::load_model(o.model);
  if (!model) return fail("generate", model.error().to_string());
  const std::string vocab_path = o.checkpoint + "/" + train::vocabulary_file_name();
  std::ifstream in(vocab_path);
  if (!in) return fail("generate", vocab_path + ": no vocabulary (written by jobs that train on text)");
  std::stringstream text;
  text << in.rdbuf();
  auto symbols = models::parse_vocabulary_json(text.str());
  if (!symbols) return fail("generate", vocab_path + ": " + symbols.error().message);
  std::map<std::string, std::int64_t> index;
  for (std::size_t i = 0; i < symbols->size(); ++i) index[(*symbols)[i]] = static_cast<std::int64_t>(i);
  std::vector<std::int64_t> prompt;
  for (std::size_t i = 0; i < o.prompt.size();) {
    const unsigned char c = static_cast<unsigned char>(o.prompt[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    auto it = index.find(o.prompt.substr(i, n));
    if (it == index.end())
      return fail("generate", "the prompt's character '" + o.prompt.substr(i, n) + "' is not in " + vocab_path);
    prompt.push_back(it->second);
    i += n;
  }
  auto generation = o.generation;
  generation.vocabulary_limit = static_cast<int>(symbols->size());
  auto ids = train::generate_tokens(*model, o.checkpoint, o.iteration, prompt, generation);
  if (!ids) return fail("generate", ids.error().to_string());
  std::string out = o.prompt;
  for (auto id : *ids)
    if (id >= 0 && id < static_cast<std::int64_t>(symbols->size())) out += (*symbols)[id];
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace

void add_export(CLI::App& app, command_set& commands) {
  auto opts = std::make_shared<export_options>();
  auto* ex = app.add_subcommand("export", "write a checkpoint's model as safetensors with Hugging Face names");
  ex->add_option("--checkpoint", opts->checkpoint, "checkpoint folder")->required();
  ex->add_option("--model", opts->model, "the model file it was trained with")->required();
  ex->add_option("--out", opts->out, "the .safetensors file to write")->required();
  ex->add_option("--iteration", opts->iteration, "the checkpoint taken after this many iterations (default: latest)");
  ex->callback([&commands, opts] { commands.selected = [opts] { return run_export(*opts); }; });

  auto* gen = app.add_subcommand("generate", "sample text from a checkpoint on the CPU");
  gen->add_option("--checkpoint", opts->checkpoint, "checkpoint folder (with vocab.json)")->required();
  gen->add_option("--model", opts->model, "the model file it was trained with")->required();
  gen->add_option("--prompt", opts->prompt, "text to continue")->required();
  gen->add_option("--tokens", opts->generation.tokens, "characters to generate (default 200)");
  gen->add_option("--temperature", opts->generation.temperature, "0: greedy (default 0.8)");
  gen->add_option("--top-k", opts->generation.top_k, "sample among the k likeliest (default: all)");
  gen->add_option("--seed", opts->generation.seed, "sampling seed");
  gen->add_option("--iteration", opts->iteration, "the checkpoint taken after this many iterations (default: latest)");
  gen->callback([&commands, opts] { commands.selected = [opts] { return run_generate(*opts); }; });
}
#else
void add_export(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "export", "write a checkpoint's model as safetensors", "needs LibTorch");
  add_not_built(app, commands, "generate", "sample text from a checkpoint", "needs LibTorch");
}
#endif

}  // namespace sailor::app
