#include <sailor/train/export.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <sailor/train/checkpoint.hpp>
#include <sailor/models/gpt.hpp>

#include "checkpoint_io.hpp"
#include "hf_import.hpp"
#include "hf_names.hpp"

namespace sailor::train {
namespace {

using json = nlohmann::json;
using detail::layer_name;
using detail::llama_layer_names;
using detail::opt_layer_names;

// The whole model (one rank, every layer) restored from the checkpoint, whichever optimizer
// wrote it.
result<std::unique_ptr<models::stage_module>> load_model(const config::model_shape& model,
                                                         const std::string& dir, int iterations) {
  if (auto st = validate_architecture(model)) return *st;
  if (iterations <= 0) iterations = latest_checkpoint(dir);
  if (iterations <= 0) return error::not_found("", "", "no complete checkpoint under " + dir);
  auto module = std::make_unique<models::stage_module>(model, 0, model.num_all_layers(), models::tp_group{}, 1);
  std::string first_failure;
  for (auto kind : {optimizer_kind::adamw, optimizer_kind::sgd}) {
    train_options options;
    options.optimizer = kind;
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (kind == optimizer_kind::adamw)
      optimizer = std::make_unique<torch::optim::AdamW>(module->tensors(), torch::optim::AdamWOptions(1e-3));
    else
      optimizer = std::make_unique<torch::optim::SGD>(module->tensors(), torch::optim::SGDOptions(1e-3));
    auto st = detail::restore_checkpoint(dir, iterations, model, options, *module, *optimizer, "[export]");
    if (!st) return module;
    if (first_failure.empty()) first_failure = st->to_string();
  }
  return error::invalid_input("", first_failure);
}

// Hugging Face's tensors of our parameters, for the model's family. Linear weights keep
// torch's [out, in] layout except GPT-2's Conv1D ([in, out]); GPT-2's fused c_attn holds q, k
// and v; biases a bias-free GPT-2 lacks are written as zeros (HF's GPT-2 always has them).
std::map<std::string, torch::Tensor> hf_tensors(const config::model_shape& m, const models::stage_module& module) {
  std::map<std::string, torch::Tensor> ours, out;
  for (const auto& p : module.parameters()) ours[p.name] = p.tensor.detach();
  auto get = [&](const std::string& name, std::int64_t zeros_if_absent = 0) {
    auto it = ours.find(name);
    if (it != ours.end()) return it->second;
    if (zeros_if_absent > 0) return torch::zeros({zeros_if_absent});
    throw std::logic_error("export: no parameter " + name);
  };
  // A layer's tensors that Hugging Face only names differently: ours under `l`, theirs under
  // `t`; `biases`: each weight's bias too.
  auto rename = [&](const std::string& l, const std::string& t, std::span<const layer_name> names, bool biases) {
    for (const auto& [a, b] : names) {
      out[t + b + ".weight"] = get(l + a + ".weight");
      // A bias-free model's biases as zeros (Hugging Face's OPT always has them).
      if (biases) out[t + b + ".bias"] = get(l + a + ".bias", get(l + a + ".weight").size(0));
    }
  };
  const int L = m.num_layers;
  const std::string head = "layer" + std::to_string(L + 1) + ".";
  const std::int64_t h = m.hidden, f = m.ffn();
  for (int i = 0; i < L; ++i) {
    const std::string l = "layer" + std::to_string(i + 1) + ".", n = std::to_string(i);
    switch (m.arch) {
      case config::architecture::gpt2: {
        const std::string t = "transformer.h." + n + ".";
        out[t + "ln_1.weight"] = get(l + "ln1.weight");
        out[t + "ln_1.bias"] = get(l + "ln1.bias", h);
        out[t + "attn.c_attn.weight"] =
            torch::cat({get(l + "attn.q.weight"), get(l + "attn.k.weight"), get(l + "attn.v.weight")}, 0).t();
        out[t + "attn.c_attn.bias"] =
            torch::cat({get(l + "attn.q.bias", h), get(l + "attn.k.bias", h), get(l + "attn.v.bias", h)});
        out[t + "attn.c_proj.weight"] = get(l + "attn.out.weight").t();
        out[t + "attn.c_proj.bias"] = get(l + "attn.out.bias", h);
        out[t + "ln_2.weight"] = get(l + "ln2.weight");
        out[t + "ln_2.bias"] = get(l + "ln2.bias", h);
        out[t + "mlp.c_fc.weight"] = get(l + "mlp.fc1.weight").t();
        out[t + "mlp.c_fc.bias"] = get(l + "mlp.fc1.bias", f);
        out[t + "mlp.c_proj.weight"] = get(l + "mlp.fc2.weight").t();
        out[t + "mlp.c_proj.bias"] = get(l + "mlp.fc2.bias", h);
        break;
      }
      case config::architecture::opt:
        rename(l, "model.decoder.layers." + n + ".", opt_layer_names, true);
        break;
      case config::architecture::llama:
        rename(l, "model.layers." + n + ".", llama_layer_names, false);
        break;
    }
  }
  auto word = get("layer0.word.weight");
  switch (m.arch) {
    case config::architecture::gpt2:
      out["transformer.wte.weight"] = word;
      out["transformer.wpe.weight"] = get("layer0.position.weight");
      out["transformer.ln_f.weight"] = get(head + "ln.weight");
      out["transformer.ln_f.bias"] = get(head + "ln.bias", h);
      break;
    case config::architecture::opt:
      out["model.decoder.embed_tokens.weight"] = word;
      out["model.decoder.embed_positions.weight"] = get("layer0.position.weight");
      out["model.decoder.final_layer_norm.weight"] = get(head + "ln.weight");
      out["model.decoder.final_layer_norm.bias"] = get(head + "ln.bias", h);
      break;
    case config::architecture::llama:
      out["model.embed_tokens.weight"] = word;
      out["model.norm.weight"] = get(head + "ln.weight");
      break;
  }
  if (!m.tied_embeddings) out["lm_head.weight"] = get(head + "head.weight");
  return out;
}

json hf_config(const config::model_shape& m) {
  json c;
  c["torch_dtype"] = "float32";
  c["vocab_size"] = m.vocabulary;
  c["tie_word_embeddings"] = m.tied_embeddings;
  switch (m.arch) {
    case config::architecture::gpt2:
      c.update({{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_positions", m.sequence},
                {"n_ctx", m.sequence}, {"n_embd", m.hidden}, {"n_layer", m.num_layers}, {"n_head", m.heads},
                {"n_inner", m.ffn()}, {"activation_function", m.gelu_tanh ? "gelu_new" : "gelu"}, {"layer_norm_epsilon", m.norm_eps},
                {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}});
      break;
    case config::architecture::opt:
      c.update({{"architectures", {"OPTForCausalLM"}}, {"model_type", "opt"}, {"hidden_size", m.hidden},
                {"ffn_dim", m.ffn()}, {"num_hidden_layers", m.num_layers}, {"num_attention_heads", m.heads},
                {"max_position_embeddings", m.sequence}, {"do_layer_norm_before", true},
                {"word_embed_proj_dim", m.hidden}, {"activation_function", "relu"}, {"enable_bias", true},
                {"dropout", 0.0}, {"attention_dropout", 0.0}});
      break;
    case config::architecture::llama:
      c.update({{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", m.hidden},
                {"intermediate_size", m.ffn()}, {"num_hidden_layers", m.num_layers},
                {"num_attention_heads", m.heads}, {"num_key_value_heads", m.kv()},
                {"max_position_embeddings", m.sequence}, {"rms_norm_eps", m.norm_eps},
                {"rope_theta", m.rope_theta}, {"hidden_act", "silu"}, {"attention_bias", false}});
      break;
  }
  return c;
}

// safetensors: u64 little-endian header length, the JSON header (padded with spaces to a
// multiple of 8), then the tensors' bytes back to back.
status write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                         const json& metadata) {
  json header;
  std::uint64_t at = 0;
  std::vector<torch::Tensor> order;
  for (const auto& [name, t] : tensors) {
    auto c = t.to(torch::kFloat).contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(c.numel()) * 4;
    header[name] = {{"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
    order.push_back(c);
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return error::failed("cannot write " + path + ": " + std::strerror(errno));
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xFF);
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : order) out.write(static_cast<const char*>(t.data_ptr()), t.numel() * 4);
  out.close();
  if (!out) return error::failed("writing " + path + " failed");
  return {};
}

// The whole model from a Hugging Face checkpoint (export_safetensors's, or any of the
// family's): hf_import.hpp.
result<std::unique_ptr<models::stage_module>> load_exported(const config::model_shape& model, const std::string& file) {
  if (auto st = validate_architecture(model)) return *st;
  auto set = detail::safetensors_set::open(file);
  if (!set) return set.error();
  auto module = std::make_unique<models::stage_module>(model, 0, model.num_all_layers(), models::tp_group{}, 1);
  if (auto counts = detail::import_into(*module, *set); !counts) return counts.error();
  return module;
}

// `tokens` ids after `prompt` drawn from `module` (every layer of `model`).
std::vector<std::int64_t> draw_tokens(const config::model_shape& model, models::stage_module& module,
                                      const std::vector<std::int64_t>& prompt, const generation_options& options) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(options.seed);
  std::vector<std::int64_t> ids = prompt;
  if (ids.empty()) ids.push_back(0);
  const std::size_t start = ids.size();
  for (int i = 0; i < options.tokens; ++i) {
    const std::size_t from = ids.size() > static_cast<std::size_t>(model.sequence) ? ids.size() - model.sequence : 0;
    auto x = torch::tensor(std::vector<std::int64_t>(ids.begin() + from, ids.end()), torch::kLong).unsqueeze(0);
    for (int layer = 0; layer <= model.num_layers; ++layer) x = module.forward_layer(layer, x);
    auto logits = module.logits(x).index({0, -1});
    if (options.vocabulary_limit > 0 && options.vocabulary_limit < logits.size(0))
      logits = logits.narrow(0, 0, options.vocabulary_limit);
    std::int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<std::int64_t>();
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        auto kth = std::get<0>(logits.topk(options.top_k)).index({-1});
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, -1), 1, false, gen).item<std::int64_t>();
    }
    ids.push_back(next);
  }
  return std::vector<std::int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end());
}

}  // namespace

result<int> export_safetensors(const config::model_shape& model, const std::string& checkpoint_dir,
                               int iterations, const std::string& out_file) {
  try {
    auto module = load_model(model, checkpoint_dir, iterations);
    if (!module) return module.error();
    auto tensors = hf_tensors(model, **module);
    json metadata = {{"format", "pt"}, {"producer", "sailor"}, {"model", model.name}};
    if (auto st = write_safetensors(out_file, tensors, metadata)) return *st;
    auto folder = std::filesystem::path(out_file).parent_path();
    auto config_path = (folder.empty() ? std::filesystem::path(".") : folder) / "config.json";
    std::ofstream(config_path) << hf_config(model).dump(2) << "\n";
    return static_cast<int>(tensors.size());
  } catch (const std::exception& e) {
    return error::failed(std::string("export: ") + e.what());
  }
}

result<std::vector<std::int64_t>> generate_tokens(const config::model_shape& model,
                                                  const std::string& checkpoint_dir, int iterations,
                                                  const std::vector<std::int64_t>& prompt,
                                                  const generation_options& options) {
  try {
    auto module = load_model(model, checkpoint_dir, iterations);
    if (!module) return module.error();
    return draw_tokens(model, **module, prompt, options);
  } catch (const std::exception& e) {
    return error::failed(std::string("generate: ") + e.what());
  }
}

result<std::vector<std::int64_t>> generate_tokens_exported(const config::model_shape& model,
                                                           const std::string& safetensors_file,
                                                           const std::vector<std::int64_t>& prompt,
                                                           const generation_options& options) {
  try {
    auto module = load_exported(model, safetensors_file);
    if (!module) return module.error();
    return draw_tokens(model, **module, prompt, options);
  } catch (const std::exception& e) {
    return error::failed(std::string("generate: ") + e.what());
  }
}

}  // namespace sailor::train
