#include <sailor/models/gpt.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <stdexcept>

#include <sailor/models/synthetic_data.hpp>

namespace sailor::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

comm::element_type element_type_of(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat: return comm::element_type::f32;
    case torch::kDouble: return comm::element_type::f64;
    case torch::kHalf: return comm::element_type::f16;
    case torch::kBFloat16: return comm::element_type::bf16;
    case torch::kInt: return comm::element_type::i32;
    case torch::kLong: return comm::element_type::i64;
    default: throw std::invalid_argument("all_reduce: unsupported tensor type");
  }
}

// Autograd functions carry the group as plain integers (saved_data holds IValues).
struct packed_tp {
  std::int64_t group;
  std::int64_t seconds;
  std::int64_t size;
};

packed_tp pack(const tp_group& tp) {
  return {reinterpret_cast<std::int64_t>(tp.group), reinterpret_cast<std::int64_t>(tp.all_reduce_seconds),
          tp.size};
}

tp_group unpack(std::int64_t group, std::int64_t seconds, std::int64_t size) {
  tp_group tp;
  tp.group = reinterpret_cast<comm::communicator*>(group);
  tp.all_reduce_seconds = reinterpret_cast<double*>(seconds);
  tp.size = static_cast<int>(size);
  return tp;
}

// In place; `t` must be contiguous. Throws on a communication error (the executor turns it
// into an error value at its boundary).
void all_reduce_tensor(torch::Tensor& t, const tp_group& tp, comm::reduce_op op) {
  if (tp.size <= 1 || tp.group == nullptr) return;
  TORCH_CHECK(t.is_contiguous(), "all_reduce needs a contiguous tensor");
  auto start = std::chrono::steady_clock::now();
  auto st = tp.group->all_reduce(
      {t.data_ptr(), static_cast<std::size_t>(t.numel()), element_type_of(t)}, op);
  if (tp.all_reduce_seconds)
    *tp.all_reduce_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (st) throw std::runtime_error("tensor-parallel all_reduce: " + st->to_string());
}

struct copy_to_tp_fn : torch::autograd::Function<copy_to_tp_fn> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, std::int64_t group,
                               std::int64_t seconds, std::int64_t size) {
    ctx->saved_data["g"] = group;
    ctx->saved_data["s"] = seconds;
    ctx->saved_data["n"] = size;
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto tp = unpack(ctx->saved_data["g"].toInt(), ctx->saved_data["s"].toInt(),
                     ctx->saved_data["n"].toInt());
    auto g = grads[0].contiguous().clone();
    all_reduce_tensor(g, tp, comm::reduce_op::sum);
    return {g, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

struct reduce_from_tp_fn : torch::autograd::Function<reduce_from_tp_fn> {
  static torch::Tensor forward(AutogradContext*, torch::Tensor x, std::int64_t group,
                               std::int64_t seconds, std::int64_t size) {
    auto y = x.contiguous().clone();
    all_reduce_tensor(y, unpack(group, seconds, size), comm::reduce_op::sum);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

struct vocab_parallel_xent_fn : torch::autograd::Function<vocab_parallel_xent_fn> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor targets,
                               std::int64_t vocab_start, std::int64_t group,
                               std::int64_t seconds, std::int64_t size) {
    auto tp = unpack(group, seconds, size);
    std::int64_t local_vocab = logits.size(1);
    // Stability: subtract the global maximum of each row.
    auto row_max = std::get<0>(logits.max(1)).contiguous();
    all_reduce_tensor(row_max, tp, comm::reduce_op::max);
    auto shifted = logits - row_max.unsqueeze(1);
    auto local = targets - vocab_start;
    auto mask = (local >= 0).logical_and(local < local_vocab);
    auto index = torch::where(mask, local, torch::zeros_like(local));
    auto maskf = mask.to(logits.scalar_type());
    auto predicted = shifted.gather(1, index.unsqueeze(1)).squeeze(1) * maskf;
    auto exps = shifted.exp();
    auto sums = torch::stack({predicted, exps.sum(1)}, 0).contiguous();
    all_reduce_tensor(sums, tp, comm::reduce_op::sum);
    auto sum_exp = sums[1];
    auto loss = sum_exp.log() - sums[0];
    exps.div_(sum_exp.unsqueeze(1));  // softmax of this shard
    ctx->save_for_backward({exps, index, maskf});
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0].clone();
    grad.scatter_add_(1, saved[1].unsqueeze(1), -saved[2].unsqueeze(1));
    grad.mul_(grads[0].unsqueeze(1));
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

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

}  // namespace

bool decays(const stage_parameter& p) { return p.tensor.dim() >= 2; }

torch::Tensor copy_to_tp(const torch::Tensor& x, const tp_group& tp) {
  if (tp.size <= 1) return x;
  auto p = pack(tp);
  return copy_to_tp_fn::apply(x, p.group, p.seconds, p.size);
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, const tp_group& tp) {
  if (tp.size <= 1) return x;
  auto p = pack(tp);
  return reduce_from_tp_fn::apply(x, p.group, p.seconds, p.size);
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits,
                                           const torch::Tensor& targets,
                                           std::int64_t vocab_start, const tp_group& tp) {
  auto p = pack(tp);
  return vocab_parallel_xent_fn::apply(logits, targets, vocab_start, p.group, p.seconds, p.size);
}

stage_module::stage_module(const config::model_shape& model, int first_layer, int end_layer,
                           tp_group tp, std::uint64_t seed)
    : model_(model), first_layer_(first_layer), end_layer_(end_layer), tp_(tp), seed_(seed) {
  const std::int64_t h = model.hidden, v = model.vocabulary, ffn = model.ffn();
  for (int layer = first_layer; layer < end_layer; ++layer) {
    auto ln = layer_name(layer);
    switch (model.kind_of(layer)) {
      case config::layer_kind::embedding:
        add(ln + "word.weight", layer, {v, h}, 0, "normal");
        add(ln + "position.weight", layer, {model.sequence, h}, -1, "normal");
        break;
      case config::layer_kind::block:
        add(ln + "ln1.weight", layer, {h}, -1, "ones");
        add(ln + "ln1.bias", layer, {h}, -1, "zeros");
        for (const char* n : {"attn.q", "attn.k", "attn.v"}) {
          add(ln + n + ".weight", layer, {h, h}, 0, "normal");
          add(ln + n + ".bias", layer, {h}, 0, "zeros");
        }
        add(ln + "attn.out.weight", layer, {h, h}, 1, "normal_out");
        add(ln + "attn.out.bias", layer, {h}, -1, "zeros");
        add(ln + "ln2.weight", layer, {h}, -1, "ones");
        add(ln + "ln2.bias", layer, {h}, -1, "zeros");
        add(ln + "mlp.fc1.weight", layer, {ffn, h}, 0, "normal");
        add(ln + "mlp.fc1.bias", layer, {ffn}, 0, "zeros");
        add(ln + "mlp.fc2.weight", layer, {h, ffn}, 1, "normal_out");
        add(ln + "mlp.fc2.bias", layer, {h}, -1, "zeros");
        break;
      case config::layer_kind::head:
        add(ln + "ln.weight", layer, {h}, -1, "ones");
        add(ln + "ln.bias", layer, {h}, -1, "zeros");
        add(ln + "head.weight", layer, {v, h}, 0, "normal");
        break;
    }
  }
}

torch::Tensor stage_module::add(const std::string& name, int layer,
                                std::vector<std::int64_t> full_shape, int shard_dim,
                                const std::string& init) {
  torch::NoGradGuard no_grad;
  torch::Tensor full;
  if (init == "ones") {
    full = torch::ones(full_shape);
  } else if (init == "zeros") {
    full = torch::zeros(full_shape);
  } else {
    double stddev = 0.02;
    if (init == "normal_out") stddev /= std::sqrt(2.0 * std::max(1, model_.num_layers));
    std::uint64_t s = mix_seed(mix_seed(seed_, static_cast<std::uint64_t>(layer)), hash_name(name));
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
  const auto& pos = param("layer0.position.weight");
  return e + pos.narrow(0, 0, tokens.size(1)).unsqueeze(0);
}

torch::Tensor stage_module::block(int layer, const torch::Tensor& x) {
  auto ln = layer_name(layer);
  const std::int64_t h = model_.hidden;
  const std::int64_t heads = model_.heads / tp_.size, head_dim = h / model_.heads;
  const std::int64_t mb = x.size(0), seq = x.size(1);

  auto a = torch::layer_norm(x, {h}, param(ln + "ln1.weight"), param(ln + "ln1.bias"), 1e-5);
  a = copy_to_tp(a, tp_);
  auto split = [&](const char* n) {
    auto y = torch::linear(a, param(ln + n + ".weight"), param(ln + n + ".bias"));
    return y.view({mb, seq, heads, head_dim}).transpose(1, 2);
  };
  auto q = split("attn.q"), k = split("attn.k"), v = split("attn.v");
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  auto causal = torch::ones({seq, seq}, torch::dtype(torch::kBool).device(x.device())).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
  auto context = torch::matmul(torch::softmax(scores, -1), v);
  context = context.transpose(1, 2).reshape({mb, seq, heads * head_dim});
  // One rank: the bias goes into the projection (one fused addmm). Several: after the sum.
  auto y = tp_.size == 1
               ? x + torch::linear(context, param(ln + "attn.out.weight"), param(ln + "attn.out.bias"))
               : x + reduce_from_tp(torch::linear(context, param(ln + "attn.out.weight")), tp_) +
                     param(ln + "attn.out.bias");

  auto m = torch::layer_norm(y, {h}, param(ln + "ln2.weight"), param(ln + "ln2.bias"), 1e-5);
  m = copy_to_tp(m, tp_);
  m = torch::gelu(torch::linear(m, param(ln + "mlp.fc1.weight"), param(ln + "mlp.fc1.bias")));
  if (tp_.size == 1) return y + torch::linear(m, param(ln + "mlp.fc2.weight"), param(ln + "mlp.fc2.bias"));
  m = reduce_from_tp(torch::linear(m, param(ln + "mlp.fc2.weight")), tp_);
  return y + m + param(ln + "mlp.fc2.bias");
}

torch::Tensor stage_module::head_loss(const torch::Tensor& x, const torch::Tensor& targets) {
  auto ln = layer_name(model_.num_layers + 1);
  auto y = torch::layer_norm(x, {model_.hidden}, param(ln + "ln.weight"), param(ln + "ln.bias"), 1e-5);
  y = copy_to_tp(y, tp_);
  const auto& w = param(ln + "head.weight");
  auto logits = torch::linear(y, w).reshape({-1, w.size(0)});
  // One rank holds the whole vocabulary: torch's fused log-softmax and NLL are faster.
  if (tp_.size == 1) return torch::nn::functional::cross_entropy(logits, targets.reshape({-1}));
  auto losses = vocab_parallel_cross_entropy(logits, targets.reshape({-1}), tp_.rank * w.size(0), tp_);
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
