// `sailor export` and `sailor generate`: a trained model out of its checkpoint.
//
//   sailor export DIR [--out FILE.safetensors] [--iteration N]
//   sailor generate DIR [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]
//                   [--iteration N]
//   (or --checkpoint C --model M.yaml in place of DIR)
//
// DIR is the run folder `sailor train` keeps (run_folder.hpp): its model file and its newest
// checkpoint. Both read the checkpoint of any plan as a one-rank plan would restore it (the
// latest unless --iteration is given). export writes safetensors with Hugging Face's names,
// and config.json and the text job's tokenizer (vocab.json, its characters, or a copy of its
// tokenizer's files) beside it; generate samples text on the CPU and decodes it with the
// tokenizer a text job kept next to its checkpoints (text_codec.hpp). A bare
// checkpoint records the model's sizes but not its family: --model names the model file.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "run_folder.hpp"
#include "sample_text.hpp"
#include "text_codec.hpp"
#include "sailor/config/load.hpp"

#if defined(SAILOR_WITH_TRAIN)
#include "sailor/train/export.hpp"
#endif

namespace sailor::app {

#if defined(SAILOR_WITH_TRAIN)
result<std::string> sample_text(const config::model_shape& model, const std::string& checkpoint_dir,
                                const std::string& prompt, const text_sample_options& o) {
  auto codec = text_codec_in(checkpoint_dir);
  if (!codec) return codec.error();
  auto ids = codec->encode(prompt, o.skip_unknown);
  if (!ids) return ids.error();
  train::generation_options generation;
  generation.tokens = o.tokens;
  generation.temperature = o.temperature;
  generation.top_k = o.top_k;
  generation.seed = o.seed;
  generation.vocabulary_limit = codec->vocabulary;
  auto drawn = o.exported_file.empty()
                 ? train::generate_tokens(model, checkpoint_dir, o.iteration, *ids, generation)
                 : train::generate_tokens_exported(model, o.exported_file, *ids, generation);
  if (!drawn) return drawn.error();
  ids->insert(ids->end(), drawn->begin(), drawn->end());
  return codec->decode(*ids);
}

result<int> export_model_files(const config::model_shape& model, const std::string& model_file,
                               const std::string& checkpoint_dir, int iterations,
                               const std::string& out_file, std::string& tokenizer) {
  namespace fs = std::filesystem;
  tokenizer.clear();
  const fs::path out{out_file};
  const fs::path folder = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(folder, ec);
  auto written = train::export_safetensors(model, checkpoint_dir, iterations, out_file);
  if (!written) return written.error();
  for (const char* name : {train::vocabulary_file_name(), train::sentencepiece_file_name(),
                           train::gpt2_vocab_file_name(), train::gpt2_merges_file_name()}) {
    const auto kept = fs::path(checkpoint_dir) / name;
    const auto copy = folder / name;
    if (!fs::exists(kept, ec)) continue;
    if (!fs::equivalent(kept, copy, ec))
      fs::copy_file(kept, copy, fs::copy_options::overwrite_existing, ec);
    if (ec) return sailor::error::failed("cannot copy " + kept.string() + " to " + copy.string() + ": " + ec.message());
    tokenizer += (tokenizer.empty() ? "" : ", ") + std::string(name);
  }
  const auto model_copy = folder / exported_model_file();
  if (!fs::equivalent(model_file, model_copy, ec))
    fs::copy_file(model_file, model_copy, fs::copy_options::overwrite_existing, ec);
  if (ec) return sailor::error::failed("cannot copy " + model_file + " to " + model_copy.string() + ": " + ec.message());
  return *written;
}

namespace {

struct export_options {
  std::string run, checkpoint, model, out, prompt;
  int iteration = 0;
  train::generation_options generation;
};

int export_failed(const char* command, const std::string& message, int code = exit_failed) {
  std::fprintf(stderr, "sailor %s: %s\n", command, message.c_str());
  return code;
}

// The checkpoint folder and the model file `command` reads: the run folder's (sailor train
// --out DIR: its model.yaml and its newest checkpoint, or the one after --iteration), or
// --checkpoint and --model.
status resolve_source(export_options& o) {
  if (o.run.empty()) {
    if (o.checkpoint.empty() || o.model.empty())
      return sailor::error::invalid_input(
        "DIR", "give the folder of a sailor train run (DIR, what sailor train printed), or both --checkpoint and --model");
    return {};
  }
  if (!o.checkpoint.empty() || !o.model.empty())
    return sailor::error::invalid_input(
      o.checkpoint.empty() ? "--model" : "--checkpoint",
      "not with a run folder (" + o.run + "): it names its checkpoint and model itself");
  // DIR/model (where the model was exported) stands for its run.
  auto named = std::filesystem::path(o.run).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();
  const auto parent = named.has_parent_path() ? named.parent_path() : std::filesystem::path(".");
  if (!run_folder::is_run(o.run) && named.filename() == run_folder::model_folder() && run_folder::is_run(parent))
    o.run = parent.string();
  if (!run_folder::is_run(o.run))
    return sailor::error::invalid_input(
      o.run, "", "not the folder of a sailor train run (no " + o.run + "/" + run_folder::record_file() +
                   "): give the folder sailor train printed (its --out), one sailor export wrote, or --checkpoint and --model");
  auto found = run_folder::newest_checkpoint(o.run, o.iteration);
  if (!found) return found.error();
  o.checkpoint = found->plan_folder.string();
  o.iteration = found->iterations;
  o.model = (std::filesystem::path(o.run) / "model.yaml").string();
  return {};
}

int run_export(export_options o) {
  if (auto err = resolve_source(o)) return report_error("export", *err);
  if (o.out.empty() && o.run.empty())
    return report_error("export", sailor::error::invalid_input("--out", "the .safetensors file to write is needed with --checkpoint"));
  if (o.out.empty())
    o.out = (std::filesystem::path(o.run) / run_folder::model_folder() / run_folder::model_file()).string();
  auto model = config::load_model(o.model);
  if (!model) return export_failed("export", model.error().to_string());
  std::string tokenizer;
  auto written = export_model_files(*model, o.model, o.checkpoint, o.iteration, o.out, tokenizer);
  if (!written) return export_failed("export", written.error().to_string());
  std::printf("wrote %d tensors of %s (%s) to %s and config.json, %s%s beside it\n", *written,
              model->name.c_str(), config::to_string(model->arch), o.out.c_str(), exported_model_file(),
              tokenizer.empty() ? "" : (" and " + tokenizer + " (its tokenizer)").c_str());
  return 0;
}

// The model sailor export wrote into `folder` (its one .safetensors file, with
// sailor-model.yaml beside it), or "" when the folder holds no such model.
std::string exported_model_in(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string found;
  if (!fs::is_regular_file(fs::path(folder) / exported_model_file(), ec)) return found;
  for (fs::directory_iterator i{folder, ec}, end; !ec && i != end; i.increment(ec))
    if (i->path().extension() == ".safetensors") {
      if (!found.empty()) return "";  // two models: which is meant is not clear
      found = i->path().string();
    }
  return found;
}

int run_generate(export_options o) {
  text_sample_options sample;
  // A folder sailor export wrote (DIR/model, or --out's), on its own: no checkpoint needed.
  if (!o.run.empty() && !run_folder::is_run(o.run) && o.checkpoint.empty()) {
    sample.exported_file = exported_model_in(o.run);
    if (!sample.exported_file.empty() && o.model.empty())
      o.model = (std::filesystem::path(o.run) / exported_model_file()).string();
  }
  if (!sample.exported_file.empty())
    o.checkpoint = o.run;  // its folder: the tokenizer
  else if (auto err = resolve_source(o))
    return report_error("generate", *err);
  auto model = config::load_model(o.model);
  if (!model) return export_failed("generate", model.error().to_string());
  sample.tokens = o.generation.tokens;
  sample.temperature = o.generation.temperature;
  sample.top_k = o.generation.top_k;
  sample.seed = o.generation.seed;
  sample.iteration = o.iteration;
  sample.skip_unknown = o.prompt.empty();  // no prompt: start from the tokenizer's first symbol
  auto text = sample_text(*model, o.checkpoint, o.prompt, sample);
  if (!text) return export_failed("generate", text.error().message);
  std::printf("%s\n", text->c_str());
  return 0;
}

}  // namespace

void add_export(CLI::App& app, command_set& commands) {
  auto opts = std::make_shared<export_options>();
  auto* ex = app.add_subcommand(
    "export", "write a trained model as safetensors with Hugging Face names, config.json and its tokenizer");
  ex->footer("  sailor export DIR                 DIR: the folder sailor train printed (its --out); writes\n"
             "                                    DIR/model/model.safetensors, config.json, sailor-model.yaml,\n"
             "                                    vocab.json (or the job's tokenizer.model, gpt2-*)\n"
             "  sailor export DIR --out F.safetensors   the same files in F's folder\n"
             "  sailor export --checkpoint C --model M.yaml --out F.safetensors   a checkpoint folder");
  ex->add_option("run", opts->run, "the run folder of sailor train (its --out DIR)");
  ex->add_option("--checkpoint", opts->checkpoint, "a checkpoint folder (.../checkpoints/<job>/v<N>), instead of a run folder");
  ex->add_option("--model", opts->model, "with --checkpoint: the model file it was trained with");
  ex->add_option("--out", opts->out, "the .safetensors file to write (default with a run folder: DIR/model/model.safetensors)");
  ex->add_option("--iteration", opts->iteration, "the checkpoint taken after this many iterations (default: latest)");
  ex->callback([&commands, opts] { commands.selected = [opts] { return run_export(*opts); }; });

  auto* gen = app.add_subcommand("generate", "sample text from a trained model (a text job's) on the CPU");
  gen->footer("  sailor generate DIR --prompt TEXT   DIR: the folder sailor train printed (its --out), or a\n"
              "                                      folder sailor export wrote (DIR/model: the model, its\n"
              "                                      sailor-model.yaml and tokenizer; no checkpoint needed)\n"
              "  sailor generate --checkpoint C --model M.yaml --prompt TEXT   a checkpoint folder (its tokenizer in it)");
  gen->add_option("run", opts->run, "the run folder of sailor train (its --out DIR), or a folder sailor export wrote");
  gen->add_option("--checkpoint", opts->checkpoint, "a checkpoint folder (with the job's tokenizer), instead of a run folder");
  gen->add_option("--model", opts->model, "with --checkpoint: the model file it was trained with");
  gen->add_option("--prompt", opts->prompt, "text to continue (default: none, the sample starts from the tokenizer's first symbol)");
  gen->add_option("--tokens", opts->generation.tokens, "tokens to generate (characters for a character-level job; default 200)");
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

result<int> export_model_files(const config::model_shape&, const std::string&, const std::string&, int,
                               const std::string&, std::string& tokenizer) {
  tokenizer.clear();
  return sailor::error::unimplemented("this build has no LibTorch: no model is exported");
}

void add_export(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "export", "write a checkpoint's model as safetensors", "needs LibTorch");
  add_not_built(app, commands, "generate", "sample text from a checkpoint", "needs LibTorch");
}
#endif

}  // namespace sailor::app
