// Megatron's tensor-parallel operators (f, g and the vocabulary-parallel cross-entropy) as
// autograd functions over the project's collective interface.
#include <sailor/models/gpt.hpp>

#include <chrono>
#include <stdexcept>

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

}  // namespace

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

}  // namespace sailor::models
