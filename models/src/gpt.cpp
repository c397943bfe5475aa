#include <sailor/models/gpt.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include <sailor/models/synthetic_data.hpp>

namespace sailor::models {
namespace {

std::uint64_t hash_name(const std::string& name) {
  // FNV-1a: stable across runs and platforms (std::hash is not).
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string layer_name(int layer) { return "layer" + std::to_string(layer) + "."; }

// HF's rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the head dimension.
torch::Tensor rotate_half(const torch::Tensor& x) {
  auto half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

bool decays(const stage_parameter& p) { return p.tensor.dim() >= 2; }

stage_module::stage_module(const config::model_shape& model, int first_layer, int end_layer,
                           tp_group tp, std::uint64_t seed)
    : model_(model), first_layer_(first_layer), end_layer_(end_layer), tp_(tp), seed_(seed) {
  const std::int64_t h = model.hidden, v = model.vocabulary, ffn = model.ffn();
  const std::int64_t kv_width = h / model.heads * model.kv();
  const bool bias = model.bias;
  const bool rms = model.arch == config::architecture::llama;
  auto norm = [&](const std::string& name, int layer) {
    add(name + ".weight", layer, {h}, -1, "ones");
    if (bias && !rms) add(name + ".bias", layer, {h}, -1, "zeros");
  };
  // Column-parallel: rows split; the bias split alike. Row-parallel: columns split, the bias
  // (added once, after the sum) replicated.
  auto column = [&](const std::string& name, int layer, std::int64_t out, std::int64_t in) {
    add(name + ".weight", layer, {out, in}, 0, "normal");
    if (bias) add(name + ".bias", layer, {out}, 0, "zeros");
  };
  auto row = [&](const std::string& name, int layer, std::int64_t out, std::int64_t in) {
    add(name + ".weight", layer, {out, in}, 1, "normal_out");
    if (bias) add(name + ".bias", layer, {out}, -1, "zeros");
  };
  for (int layer = first_layer; layer < end_layer; ++layer) {
    auto ln = layer_name(layer);
    switch (model.kind_of(layer)) {
      case config::layer_kind::embedding:
        add(ln + "word.weight", layer, {v, h}, 0, "normal");
        if (model.learned_positions)
          add(ln + "position.weight", layer, {model.position_rows(), h}, -1, "normal");
        break;
      case config::layer_kind::block:
        norm(ln + "ln1", layer);
        column(ln + "attn.q", layer, h, h);
        column(ln + "attn.k", layer, kv_width, h);
        column(ln + "attn.v", layer, kv_width, h);
        row(ln + "attn.out", layer, h, h);
        norm(ln + "ln2", layer);
        if (model.gated_mlp) column(ln + "mlp.gate", layer, ffn, h);
        column(ln + "mlp.fc1", layer, ffn, h);
        row(ln + "mlp.fc2", layer, h, ffn);
        break;
      case config::layer_kind::head:
        norm(ln + "ln", layer);
        // Tied: a stage holding the embedding reads its matrix; a later stage keeps a copy,
        // drawn as the embedding is, whose gradient the runtime sums with the embedding's
        // (as Megatron-LM does), so both copies stay equal.
        if (!model.tied_embeddings)
          add(ln + "head.weight", layer, {v, h}, 0, "normal");
        else if (first_layer > 0)
          add(ln + "head.weight", layer, {v, h}, 0, "normal", 0, "layer0.word.weight");
        break;
    }
  }
}

torch::Tensor stage_module::add(const std::string& name, int layer,
                                std::vector<std::int64_t> full_shape, int shard_dim,
                                const std::string& init, int seed_layer,
                                const std::string& seed_name) {
  torch::NoGradGuard no_grad;
  torch::Tensor full;
  if (init == "ones") {
    full = torch::ones(full_shape);
  } else if (init == "zeros") {
    full = torch::zeros(full_shape);
  } else {
    double stddev = 0.02;
    if (init == "normal_out") stddev /= std::sqrt(2.0 * std::max(1, model_.num_layers));
    const int key_layer = seed_name.empty() ? layer : seed_layer;
    const std::string& key_name = seed_name.empty() ? name : seed_name;
    std::uint64_t s = mix_seed(mix_seed(seed_, static_cast<std::uint64_t>(key_layer)), hash_name(key_name));
    auto gen = at::detail::createCPUGenerator(s);
    full = at::randn(full_shape, gen) * stddev;
  }
  stage_parameter p;
  p.name = name;
  p.shard_dim = shard_dim;
  p.full_size = shard_dim >= 0 ? full_shape[shard_dim] : 0;
  if (shard_dim >= 0 && tp_.size > 1) {
    std::int64_t part = p.full_size / tp_.size;
    full = full.narrow(shard_dim, tp_.rank * part, part);
  }
  p.tensor = full.contiguous().clone().set_requires_grad(true);
  by_name_[name] = p.tensor;
  params_.push_back(p);
  return p.tensor;
}

const torch::Tensor& stage_module::param(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) throw std::logic_error("stage_module: no parameter " + name);
  return it->second;
}

torch::Tensor stage_module::optional_param(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? torch::Tensor() : it->second;
}

void stage_module::set_tp_group(const tp_group& tp) {
  if (tp.rank != tp_.rank || tp.size != tp_.size)
    throw std::logic_error("stage_module: the TP rank and size are fixed at construction");
  tp_ = tp;
}

void stage_module::to(torch::Device device) {
  torch::NoGradGuard no_grad;
  for (auto& p : params_) {
    p.tensor = p.tensor.detach().to(device).set_requires_grad(true);
    by_name_[p.name] = p.tensor;
  }
}

std::int64_t stage_module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& p : params_) n += p.tensor.numel();
  return n;
}

std::vector<torch::Tensor> stage_module::tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : params_) out.push_back(p.tensor);
  return out;
}

torch::Tensor stage_module::norm(const std::string& prefix, const torch::Tensor& x) const {
  const auto& w = param(prefix + ".weight");
  if (model_.arch == config::architecture::llama) {
    auto variance = x.pow(2).mean(-1, true);
    return x * torch::rsqrt(variance + model_.norm_eps) * w;
  }
  return torch::layer_norm(x, {model_.hidden}, w, optional_param(prefix + ".bias"), model_.norm_eps);
}

torch::Tensor stage_module::linear(const std::string& prefix, const torch::Tensor& x) const {
  return torch::linear(x, param(prefix + ".weight"), optional_param(prefix + ".bias"));
}

// Row-parallel projection added to the residual `x`: with one rank the bias goes into the
// projection (one fused addmm); with several it is added once, after the sum.
torch::Tensor stage_module::row_parallel_residual(const std::string& prefix, const torch::Tensor& x,
                                                  const torch::Tensor& in) const {
  if (tp_.size == 1) return x + linear(prefix, in);
  auto y = x + reduce_from_tp(torch::linear(in, param(prefix + ".weight")), tp_);
  auto b = optional_param(prefix + ".bias");
  return b.defined() ? y + b : y;
}

torch::Tensor stage_module::embed(const torch::Tensor& tokens) {
  const auto& word = param("layer0.word.weight");
  torch::Tensor e;
  if (tp_.size == 1) {
    e = torch::embedding(word, tokens);
  } else {
    std::int64_t part = word.size(0), start = tp_.rank * part;
    auto local = tokens - start;
    auto mask = (local >= 0).logical_and(local < part);
    auto index = torch::where(mask, local, torch::zeros_like(local));
    e = torch::embedding(word, index) * mask.unsqueeze(-1).to(word.scalar_type());
    e = reduce_from_tp(e, tp_);
  }
  if (!model_.learned_positions) return e;
  const auto& pos = param("layer0.position.weight");
  return e + pos.narrow(0, model_.position_offset(), tokens.size(1)).unsqueeze(0);
}

// Rotary position embedding of q or k [mb, heads, seq, head_dim], HF Llama's convention.
torch::Tensor stage_module::rotary(const torch::Tensor& x) const {
  const std::int64_t seq = x.size(2), dim = x.size(3);
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
  auto inv_freq = torch::pow(model_.rope_theta, -torch::arange(0, dim, 2, opts) / double(dim));
  auto freqs = torch::outer(torch::arange(seq, opts), inv_freq);
  auto angles = torch::cat({freqs, freqs}, -1).to(x.scalar_type());
  return x * angles.cos() + rotate_half(x) * angles.sin();
}

torch::Tensor stage_module::attention(const std::string& ln, const torch::Tensor& a) const {
  const std::int64_t head_dim = model_.hidden / model_.heads;
  const std::int64_t heads = model_.heads / tp_.size, kv_heads = model_.kv() / tp_.size;
  const std::int64_t mb = a.size(0), seq = a.size(1);
  auto split = [&](const char* n, std::int64_t count) {
    return linear(ln + n, a).view({mb, seq, count, head_dim}).transpose(1, 2);
  };
  auto q = split("attn.q", heads), k = split("attn.k", kv_heads), v = split("attn.v", kv_heads);
  if (!model_.learned_positions) {
    q = rotary(q);
    k = rotary(k);
  }
  if (kv_heads != heads) {
    // Grouped-query attention: each local KV head serves heads / kv_heads query heads (the
    // shards hold matching groups: kv_heads divides by the TP degree).
    k = k.repeat_interleave(heads / kv_heads, 1);
    v = v.repeat_interleave(heads / kv_heads, 1);
  }
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  auto causal = torch::ones({seq, seq}, torch::dtype(torch::kBool).device(a.device())).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
  auto context = torch::matmul(torch::softmax(scores, -1), v);
  return context.transpose(1, 2).reshape({mb, seq, heads * head_dim});
}

torch::Tensor stage_module::block(int layer, const torch::Tensor& x) {
  auto ln = layer_name(layer);
  auto a = copy_to_tp(norm(ln + "ln1", x), tp_);
  auto y = row_parallel_residual(ln + "attn.out", x, attention(ln, a));
  auto m = copy_to_tp(norm(ln + "ln2", y), tp_);
  switch (model_.arch) {
    case config::architecture::llama:
      m = torch::silu(linear(ln + "mlp.gate", m)) * linear(ln + "mlp.fc1", m);
      break;
    case config::architecture::opt: m = torch::relu(linear(ln + "mlp.fc1", m)); break;
    case config::architecture::gpt2: m = torch::gelu(linear(ln + "mlp.fc1", m), model_.gelu_tanh ? "tanh" : "none"); break;
  }
  return row_parallel_residual(ln + "mlp.fc2", y, m);
}

const torch::Tensor& stage_module::head_matrix() const {
  return model_.tied_embeddings && has_embedding() ? param("layer0.word.weight")
                                                   : param(layer_name(model_.num_layers + 1) + "head.weight");
}

int stage_module::tied_head_copy() const {
  if (!model_.tied_embeddings || has_embedding() || !has_head()) return -1;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == layer_name(model_.num_layers + 1) + "head.weight") return static_cast<int>(i);
  return -1;
}

torch::Tensor stage_module::logits(const torch::Tensor& x) {
  auto y = copy_to_tp(norm(layer_name(model_.num_layers + 1) + "ln", x), tp_);
  return torch::linear(y, head_matrix());
}

torch::Tensor stage_module::head_loss(const torch::Tensor& x, const torch::Tensor& targets) {
  const auto& w = head_matrix();
  auto flat = logits(x).reshape({-1, w.size(0)});
  // One rank holds the whole vocabulary: torch's fused log-softmax and NLL are faster.
  if (tp_.size == 1) return torch::nn::functional::cross_entropy(flat, targets.reshape({-1}));
  auto losses = vocab_parallel_cross_entropy(flat, targets.reshape({-1}), tp_.rank * w.size(0), tp_);
  return losses.mean();
}

torch::Tensor stage_module::forward_layer(int layer, const torch::Tensor& x,
                                          const torch::Tensor& targets) {
  switch (model_.kind_of(layer)) {
    case config::layer_kind::embedding: return embed(x);
    case config::layer_kind::block: return block(layer, x);
    case config::layer_kind::head: return head_loss(x, targets);
  }
  return x;
}

torch::Tensor stage_module::forward(const torch::Tensor& input, const torch::Tensor& targets) {
  torch::Tensor x = input;
  for (int layer = first_layer_; layer < end_layer_; ++layer) x = forward_layer(layer, x, targets);
  return x;
}

int stage_module::layer_of(std::size_t param) const {
  const auto& name = params_.at(param).name;  // "layer<N>.…"
  return std::stoi(name.substr(5, name.find('.') - 5));
}

}  // namespace sailor::models
