// The optimizer step: the loss and the gradient norm over the whole plan in one all-reduce,
// clipping, the learning-rate schedule, the step itself, and the checkpoint after it.
#include "executor_impl.hpp"

namespace sailor::train {

double stage_executor::impl::local_grad_norm_sq() const {
  // Each piece of every parameter counts once: replica 0 of each stage; replicated tensors on
  // TP rank 0.
  double norm_sq = 0;
  if (!counts_norm) return norm_sq;
  torch::NoGradGuard no_grad;
  if (role.tp_rank == 0) {
    if (flat.buffer.defined()) norm_sq = sum_of_squares(flat.buffer);
  } else {
    for (const auto& p : module->parameters())
      if (p.shard_dim >= 0) norm_sq += sum_of_squares(p.tensor.grad());
  }
  // A tied head's copy holds the embedding's gradient, which stage 0 counts.
  if (int copy = module->tied_head_copy(); copy >= 0)
    norm_sq -= sum_of_squares(module->parameters()[copy].tensor.grad());
  return norm_sq;
}

double stage_executor::impl::step_optimizer(int iteration, double loss_sum,
                                            iteration_telemetry& tel) {
  auto opt_start = clock_type::now();
  const double norm_sq = local_grad_norm_sq();
  auto totals = torch::tensor({last_stage() && role.tp_rank == 0 ? loss_sum : 0.0, norm_sq},
                              torch::kDouble).to(device);
  auto reduce_start = clock_type::now();
  auto st = step_reduce().all_reduce(view_of(totals));
  const double world_seconds = seconds_since(reduce_start);
  if (st) throw std::runtime_error(st->to_string());
  totals = totals.cpu();
  tel.loss = totals[0].item<double>() / step_micro_batches;
  tel.grad_norm = std::sqrt(totals[1].item<double>());
  // Every rank has the same totals: the whole plan fails this iteration, before the step, so
  // no rank takes a non-finite update into its weights, optimizer state or checkpoints.
  if (auto bad = non_finite_totals(tel.loss, tel.grad_norm))
    throw non_finite_step(*bad);
  {
    torch::NoGradGuard no_grad;
    if (options.clip_norm > 0) {
      double coef = options.clip_norm / (tel.grad_norm + 1e-6);
      // Every gradient is a view into the flat buffer.
      if (coef < 1.0 && flat.buffer.defined()) flat.buffer.mul_(coef);
    }
  }
  set_learning_rate(iteration);
  if (!fused_adamw_step(*optimizer)) optimizer->step();
  tel.optimizer_s = seconds_since(opt_start) - world_seconds;
  return world_seconds;
}

std::optional<std::string> non_finite_totals(double loss, double grad_norm) {
  auto text = [](double x) { return std::isnan(x) ? std::string{"nan"} : x > 0 ? "inf" : "-inf"; };
  if (!std::isfinite(loss))
    return "the loss is " + text(loss);
  if (!std::isfinite(grad_norm))
    return "the gradient norm is " + text(grad_norm);
  return std::nullopt;
}

double learning_rate_at(const train_options& o, int iteration) {
  const double lr = o.learning_rate;
  if (o.warmup_iterations > 0 && iteration < o.warmup_iterations)
    return lr * (iteration + 1) / (o.warmup_iterations + 1);
  if (o.min_learning_rate < 0 || o.decay_iterations <= o.warmup_iterations) return lr;
  if (iteration > o.decay_iterations) return o.min_learning_rate;
  const double ratio = double(iteration - o.warmup_iterations) / (o.decay_iterations - o.warmup_iterations);
  return o.min_learning_rate + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - o.min_learning_rate);
}

void stage_executor::impl::set_learning_rate(int iteration) {
  const double lr = learning_rate_at(options, iteration);
  for (auto& group : optimizer->param_groups()) {
    if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&group.options())) adamw->lr(lr);
    else if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) sgd->lr(lr);
  }
}

double stage_executor::impl::take_checkpoint(int iteration) {
  if (!checkpoints) return 0;
  if ((iteration + 1) % options.checkpoint_every != 0 && iteration + 1 != options.checkpoint_final)
    return 0;
  if (outer) {
    const auto state = outer->state();
    return checkpoints->take(iteration + 1, *module, *optimizer, &state);
  }
  return checkpoints->take(iteration + 1, *module, *optimizer);
}

}  // namespace sailor::train
