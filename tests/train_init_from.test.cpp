// Starting from a model trained elsewhere (issue 42, items 1 and 3): a Hugging Face
// safetensors checkpoint loads into any plan's stages, re-sliced to its stage boundaries and TP
// degrees; export then import round-trips bit for bit; GPT-2's own file layout (no
// "transformer." prefix, fp16, sharded with an index, mask buffers) reads too; a malformed file
// is refused naming the file and the tensor; `sailor train --init-from` fine-tunes across two
// nodes from where an earlier run ended, its validation loss reported from iteration 0.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/checkpoint.hpp>
#include <sailor/train/executor.hpp>
#include <sailor/train/export.hpp>
#include <sailor/train/pretrained.hpp>
#include <sailor/models/shapes.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "local_job.hpp"
#include "rank_threads.hpp"
#include "run_command.hpp"
#include "temp_file.hpp"
#include "tiny_plans.hpp"
#include "word_corpus.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_init_from {

namespace {

using namespace sailor;
using sailor::testing::make_plan;
using sailor::testing::stage;
using json = nlohmann::json;
namespace fs = std::filesystem;

// A safetensors file as the test edits it: name -> (dtype, shape, bytes).
struct stored {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
using tensor_file = std::map<std::string, stored>;

tensor_file read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(all[i])) << (8 * i);
  auto header = json::parse(all.substr(8, n));
  tensor_file out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const auto o = e["data_offsets"].get<std::vector<std::uint64_t>>();
    out[name] = {e["dtype"], e["shape"].get<std::vector<std::int64_t>>(), all.substr(8 + n + o[0], o[1] - o[0])};
  }
  return out;
}

void write_file(const std::string& path, const tensor_file& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string text = header.dump();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((text.size() >> (8 * i)) & 0xFF));
  out << text << data;
}

// Trains `model` 4 iterations on a two-stage plan (TP 2 on the first), checkpoints the state
// after them in `dir`, and returns the loss of iteration 4 computed from that state.
double train_and_checkpoint(const config::model_shape& model, const std::string& dir) {
  auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  options.checkpoint_dir = dir;
  options.checkpoint_every = 4;
  double loss = 0;
  auto errors = sailor::testing::run_rank_threads(
      model, make_plan({stage(0, 3, {2}), stage(3, 3, {1})}), options,
      [&](int, train::stage_executor& exec) -> std::string {
        for (int it = 0; it < 4; ++it)
          if (auto tel = exec.run_iteration(it); !tel) return tel.error().to_string();
        if (auto st = exec.flush_checkpoints()) return st->to_string();
        auto tel = exec.run_iteration(4);
        if (!tel) return tel.error().to_string();
        loss = tel->loss;  // the same on every rank
        return {};
      });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  return loss;
}

// `plan`'s ranks load `file` and run iteration 4: its loss. With `snapshot_dir`, the ranks of
// replica 0 first write the state they loaded there as the checkpoint after 4 iterations.
double loss_after_import(const config::model_shape& model, const config::plan& plan, const std::string& file,
                         const std::string& snapshot_dir = {}) {
  // SGD without momentum: a state of parameters alone, which export reads before any step.
  auto options = sailor::testing::options_for(train::optimizer_kind::sgd);
  options.momentum = 0;
  double loss = 0;
  std::mutex mu;
  auto errors = sailor::testing::run_rank_threads(
      model, plan, options, [&](int, train::stage_executor& exec) -> std::string {
        if (auto st = exec.load_pretrained(file)) return st->to_string();
        if (!snapshot_dir.empty() && exec.role().replica == 0) {
          auto shard = exec.state_snapshot(4);
          if (!shard) return shard.error().to_string();
          const auto folder = train::checkpoint_path(snapshot_dir, 4);
          std::lock_guard lock{mu};
          fs::create_directories(folder);
          std::ofstream(folder + "/" + shard->name, std::ios::binary)
              .write(reinterpret_cast<const char*>(shard->bytes.data()), static_cast<std::streamsize>(shard->bytes.size()));
        }
        auto tel = exec.run_iteration(4);
        if (!tel) return tel.error().to_string();
        loss = tel->loss;
        return {};
      });
  for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  return loss;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The error check_pretrained gives for `file` (it must refuse it).
std::string refusal(const config::model_shape& model, const std::string& file) {
  auto r = train::check_pretrained(model, file);
  REQUIRE_FALSE_MESSAGE(r, "accepted " << file);
  return r.error().to_string();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("init_from: a GPT-2 exported from one plan loads into others with the same loss, and exports back bit for bit") {
  auto model = models::tiny_gpt_shape();
  sailor::testing::temp_dir dir;
  const double trained = train_and_checkpoint(model, dir.path("ckpt"));
  fs::create_directories(dir.path("a"));
  fs::create_directories(dir.path("b"));
  REQUIRE(train::export_safetensors(model, dir.path("ckpt"), 4, dir.path("a/model.safetensors")));
  auto checked = train::check_pretrained(model, dir.path("a"));
  REQUIRE_MESSAGE(checked, (checked ? "" : checked.error().to_string()));
  // c_attn holds q, k and v: 4 more parameters of ours than tensors of the file per block.
  CHECK(checked->tensors == static_cast<int>(read_file(dir.path("a/model.safetensors")).size()) + 4 * model.num_layers);
  CHECK(checked->unused.empty());

  // Other stage boundaries, TP 2 on the second stage; and two replicas of one stage, TP 1 and 2.
  const double split = loss_after_import(model, make_plan({stage(0, 2, {1}), stage(2, 4, {2})}),
                                         dir.path("a/model.safetensors"), dir.path("again"));
  CHECK(split == doctest::Approx(trained).epsilon(1e-5));
  const double replicas = loss_after_import(model, make_plan({stage(0, 6, {1, 2})}), dir.path("a"));
  CHECK(replicas == doctest::Approx(trained).epsilon(1e-5));

  // What the first plan loaded, exported again: the same bytes.
  REQUIRE(train::export_safetensors(model, dir.path("again"), 4, dir.path("b/model.safetensors")));
  CHECK(slurp(dir.path("b/model.safetensors")) == slurp(dir.path("a/model.safetensors")));
}

TEST_CASE("init_from: GPT-2's own layout reads: no transformer. prefix, fp16, two shards with an index, mask buffers") {
  auto model = models::tiny_gpt_shape();
  sailor::testing::temp_dir dir;
  const double trained = train_and_checkpoint(model, dir.path("ckpt"));
  REQUIRE(train::export_safetensors(model, dir.path("ckpt"), 4, dir.path("model.safetensors")));
  tensor_file first, second;
  json weight_map;
  for (auto& [name, t] : read_file(dir.path("model.safetensors"))) {
    auto f = torch::from_blob(t.bytes.data(), t.shape, torch::kFloat).to(torch::kHalf).contiguous();
    stored half{"F16", t.shape, std::string(static_cast<const char*>(f.data_ptr()), f.numel() * 2)};
    const std::string bare = name.starts_with("transformer.") ? name.substr(12) : name;
    const bool in_first = bare.starts_with("h.0.") || bare.starts_with("h.1.") || bare.starts_with("w");
    (in_first ? first : second)[bare] = half;
    weight_map[bare] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  first["h.0.attn.bias"] = {"F32", {1, 1, 2, 2}, std::string(16, '\x01')};  // a mask buffer
  weight_map["h.0.attn.bias"] = "model-00001-of-00002.safetensors";
  fs::create_directories(dir.path("gpt2"));
  write_file(dir.path("gpt2/model-00001-of-00002.safetensors"), first);
  write_file(dir.path("gpt2/model-00002-of-00002.safetensors"), second);
  std::ofstream(dir.path("gpt2/model.safetensors.index.json")) << json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump();

  auto checked = train::check_pretrained(model, dir.path("gpt2"));
  REQUIRE_MESSAGE(checked, (checked ? "" : checked.error().to_string()));
  CHECK(checked->unused.empty());
  // fp16 weights: the loss within fp16's rounding of the trained one.
  const double loaded = loss_after_import(model, make_plan({stage(0, 3, {1}), stage(3, 3, {2})}), dir.path("gpt2"));
  CHECK(std::abs(loaded - trained) < 2e-3 * trained);

  // An index that places a tensor in a file that does not hold it is refused, naming both.
  weight_map["ln_f.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir.path("gpt2/model.safetensors.index.json"), std::ios::trunc)
      << json{{"weight_map", weight_map}}.dump();
  const auto e = refusal(model, dir.path("gpt2"));
  CHECK(contains(e, "model.safetensors.index.json"));
  CHECK(contains(e, "ln_f.weight"));
}

TEST_CASE("init_from: a malformed file is refused, naming the file and the tensor") {
  auto model = models::tiny_gpt_shape();
  sailor::testing::temp_dir dir;
  train_and_checkpoint(model, dir.path("ckpt"));
  const auto good = dir.path("good.safetensors");
  REQUIRE(train::export_safetensors(model, dir.path("ckpt"), 4, good));
  const auto tensors = read_file(good);
  const std::string fc = "transformer.h.1.mlp.c_fc.weight";
  REQUIRE(tensors.count(fc));

  SUBCASE("a truncated header") {
    const auto file = dir.write("cut.safetensors", slurp(good).substr(0, 40));
    const auto e = refusal(model, file);
    CHECK(contains(e, file));
    CHECK(contains(e, "truncated"));
  }
  SUBCASE("the data cut short") {
    const auto whole = slurp(good);
    const auto file = dir.write("short.safetensors", whole.substr(0, whole.size() - 100));
    const auto e = refusal(model, file);
    CHECK(contains(e, file));
    CHECK(contains(e, "outside the file"));
  }
  SUBCASE("a tensor missing") {
    auto t = tensors;
    t.erase(fc);
    write_file(dir.path("missing.safetensors"), t);
    const auto e = refusal(model, dir.path("missing.safetensors"));
    CHECK(contains(e, dir.path("missing.safetensors")));
    CHECK(contains(e, fc + ": missing"));
  }
  SUBCASE("a tensor of another shape") {
    auto t = tensors;
    t[fc].shape = {t[fc].shape[1], t[fc].shape[0]};  // same bytes, transposed shape
    write_file(dir.path("shape.safetensors"), t);
    const auto e = refusal(model, dir.path("shape.safetensors"));
    CHECK(contains(e, fc));
    CHECK(contains(e, "shape [128, 32] there"));
    CHECK(contains(e, "expected [128, 32]"));
  }
  SUBCASE("an integer dtype") {
    auto t = tensors;
    t[fc].dtype = "I32";  // same size per element
    write_file(dir.path("dtype.safetensors"), t);
    const auto e = refusal(model, dir.path("dtype.safetensors"));
    CHECK(contains(e, fc));
    CHECK(contains(e, "dtype I32"));
  }
  SUBCASE("a value that is not finite") {
    auto t = tensors;
    const float nan = std::nanf("");
    std::memcpy(t[fc].bytes.data() + 8, &nan, 4);
    write_file(dir.path("nan.safetensors"), t);
    const auto e = refusal(model, dir.path("nan.safetensors"));
    CHECK(contains(e, fc));
    CHECK(contains(e, "not finite"));
  }
  SUBCASE("a model with a smaller vocabulary than the file's") {
    auto small = model;
    small.vocabulary = 32;
    const auto e = refusal(small, good);
    CHECK(contains(e, "transformer.wte.weight"));
    CHECK(contains(e, "expected [32, 32]"));
  }
  SUBCASE("a non-zero bias the model lacks") {
    auto no_bias = model;
    no_bias.bias = false;
    const auto e = refusal(no_bias, good);
    CHECK(contains(e, ".bias"));
    CHECK(contains(e, "bias: false"));
  }
}

TEST_CASE("init_from: a vocabulary padded for a TP degree keeps the file's rows and reads") {
  auto model = models::tiny_gpt_shape();
  sailor::testing::temp_dir dir;
  train_and_checkpoint(model, dir.path("ckpt"));
  REQUIRE(train::export_safetensors(model, dir.path("ckpt"), 4, dir.path("m.safetensors")));
  auto padded = model;
  padded.vocabulary = 72;
  auto checked = train::check_pretrained(padded, dir.path("m.safetensors"));
  REQUIRE_MESSAGE(checked, (checked ? "" : checked.error().to_string()));
}

// Fine-tuning on the command line: a first run trains and exports its model; a second,
// across two nodes, starts from that model with --init-from: its validation loss before
// training is the first run's last, and it goes on from there.
TEST_CASE("init_from: sailor train --init-from fine-tunes across two nodes from where an earlier run ended") {
  using sailor::testing::run_command;
  using sailor::testing::sailor_bin;
  sailor::testing::temp_dir dir;
  const auto corpus = dir.write("corpus.txt", sailor::testing::word_corpus(12000));
  const auto model_file = dir.write("model.yaml",
      "name: tiny-char\narchitecture: gpt2\nlayers: 2\nhidden: 32\nheads: 4\nffn_hidden: 64\n"
      "sequence: 16\nvocabulary: 32\ndtype: fp32\n");
  const auto job_file = dir.write("job.yaml",
      "global_batch: 8\nobjective: max_throughput\noptimizer: adamw\nmixed_precision: false\n"
      "allow_recompute: false\nseed: 5\niterations: 30\neval_every: 10\neval_batches: 2\n"
      "data: {path: " + corpus + ", format: text}\nlr: 3.0e-3\nwarmup_iterations: 2\n");
  const std::string common = sailor_bin() + " train --model " + model_file + " --job " + job_file +
                             " --planner even --no-dashboard";
  auto first = sailor::testing::run_with_summary(common + " --nodes 1 --out " + dir.path("first"), dir, 300);
  const auto first_val = first.summary["val_loss_curve"];
  REQUIRE(first_val.size() == 3);
  const double ended = first_val.back()[1].get<double>();

  auto tuned = sailor::testing::run_command(common + " --nodes 2 --iterations 10 --out " + dir.path("second") +
                                                " --init-from " + dir.path("first/model") + " --summary-json " +
                                                dir.path("second.json"),
                                            300);
  INFO(tuned.out);
  INFO(tuned.err);
  REQUIRE(tuned.exit_code == 0);
  const auto summary = sailor::testing::read_json(dir.path("second.json"));
  const auto val = summary["val_loss_curve"];
  REQUIRE(val.size() == 2);
  CHECK(val[0][0].get<int>() == 0);
  CHECK(val[0][1].get<double>() == doctest::Approx(ended).epsilon(1e-4));
  // Its first loss is nearer the first run's last than a fresh model's first (about ln 32).
  const auto& losses = first.summary["loss_curve"];
  const double fresh = losses.front().get<double>(), trained = losses.back().get<double>();
  REQUIRE(trained < fresh - 0.1);
  CHECK(summary["loss_curve"][0].get<double>() < (fresh + trained) / 2);

  // A file that does not fit the model is refused before any node starts, naming it.
  const auto other = dir.write("other.yaml",
      "name: other\narchitecture: gpt2\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 64\n"
      "sequence: 16\nvocabulary: 32\ndtype: fp32\n");
  auto refused = run_command(sailor_bin() + " train --model " + other + " --job " + job_file +
                                 " --planner even --no-dashboard --nodes 1 --init-from " + dir.path("first/model"),
                             120);
  CHECK(refused.exit_code != 0);
  CHECK(contains(refused.err, "init_from"));
  CHECK(contains(refused.err, "transformer.wte.weight"));
}

}  // namespace integration_train_init_from
#endif  // __has_include(<sailor/models/shapes.hpp>)
