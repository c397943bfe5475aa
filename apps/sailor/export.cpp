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
#include "sample_text.hpp"
#include "sailor/config/load.hpp"

#if defined(SAILOR_WITH_TRAIN)
#include "sailor/train/export.hpp"
#include "sailor/models/token_data.hpp"
#endif

namespace sailor::app {

#if defined(SAILOR_WITH_TRAIN)
result<std::string> sample_text(const config::model_shape& model, const std::string& checkpoint_dir,
                                const std::string& prompt, const text_sample_options& o) {
  const std::string vocab_path = checkpoint_dir + "/" + train::vocabulary_file_name();
  std::ifstream in(vocab_path);
  if (!in)
    return sailor::error::invalid_input(vocab_path, "",
                                        "no vocabulary (written by jobs that train on text)");
  std::stringstream text;
  text << in.rdbuf();
  auto symbols = models::parse_vocabulary_json(text.str());
  if (!symbols)
    return sailor::error::invalid_input(vocab_path, "", symbols.error().message);
  std::map<std::string, std::int64_t> index;
  for (std::size_t i = 0; i < symbols->size(); ++i) index[(*symbols)[i]] = static_cast<std::int64_t>(i);
  std::vector<std::int64_t> ids;
  std::string used;
  for (std::size_t i = 0; i < prompt.size();) {
    const unsigned char c = static_cast<unsigned char>(prompt[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    auto it = index.find(prompt.substr(i, n));
    if (it == index.end() && o.skip_unknown) {
      i += n;
      continue;
    }
    if (it == index.end())
      return sailor::error::invalid_input(
        "--prompt", "the prompt's character '" + prompt.substr(i, n) + "' is not in " + vocab_path);
    ids.push_back(it->second);
    used += prompt.substr(i, n);
    i += n;
  }
  if (ids.empty() && o.skip_unknown && !symbols->empty()) {
    ids.push_back(0);
    used = (*symbols)[0];
  }
  train::generation_options generation;
  generation.tokens = o.tokens;
  generation.temperature = o.temperature;
  generation.top_k = o.top_k;
  generation.seed = o.seed;
  generation.vocabulary_limit = static_cast<int>(symbols->size());
  auto drawn = train::generate_tokens(model, checkpoint_dir, o.iteration, ids, generation);
  if (!drawn) return drawn.error();
  std::string out = used;
  for (auto id : *drawn)
    if (id >= 0 && id < static_cast<std::int64_t>(symbols->size())) out += (*symbols)[id];
  return out;
}

namespace {

struct export_options {
  std::string checkpoint, model, out, prompt;
  int iteration = 0;
  train::generation_options generation;
};

int export_failed(const char* command, const std::string& message) {
  std::fprintf(stderr, "sailor %s: %s\n", command, message.c_str());
  return 1;
}

int run_export(const export_options& o) {
  auto model = config::load_model(o.model);
  if (!model) return export_failed("export", model.error().to_string());
  auto written = train::export_safetensors(*model, o.checkpoint, o.iteration, o.out);
  if (!written) return export_failed("export", written.error().to_string());
  std::printf("wrote %d tensors of %s (%s) to %s and config.json beside it\n", *written,
              model->name.c_str(), config::to_string(model->arch), o.out.c_str());
  return 0;
}

int run_generate(const export_options& o) {
  auto model = config::load_model(o.model);
  if (!model) return export_failed("generate", model.error().to_string());
  text_sample_options sample;
  sample.tokens = o.generation.tokens;
  sample.temperature = o.generation.temperature;
  sample.top_k = o.generation.top_k;
  sample.seed = o.generation.seed;
  sample.iteration = o.iteration;
  auto text = sample_text(*model, o.checkpoint, o.prompt, sample);
  if (!text) return export_failed("generate", text.error().message);
  std::printf("%s\n", text->c_str());
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
result<std::string> sample_text(const config::model_shape&, const std::string&, const std::string&,
                                const text_sample_options&) {
  return sailor::error::unimplemented("this build has no LibTorch: no text is sampled");
}

void add_export(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "export", "write a checkpoint's model as safetensors", "needs LibTorch");
  add_not_built(app, commands, "generate", "sample text from a checkpoint", "needs LibTorch");
}
#endif

}  // namespace sailor::app
