#include "evaluation.hpp"

#include <memory>
#include <stdexcept>
#include <vector>

#include "schedule.hpp"

namespace sailor::train::detail {
namespace {

// Training tags stay below bit 55 for any realistic run; evaluation messages sit above it.
constexpr std::uint64_t evaluation_tag_bit = std::uint64_t{1} << 55;

comm::buffer_view view_of(const torch::Tensor& t) {
  TORCH_CHECK(t.is_contiguous() && t.scalar_type() == torch::kFloat,
              "evaluation activations are contiguous fp32 tensors");
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), comm::element_type::f32};
}

int tp_of(const config::plan& p, int stage, int replica) {
  return std::max(1, p.stages[stage].replicas[replica].tp);
}

}  // namespace

double evaluate_loss(const evaluation_context& ctx, int batches, std::uint64_t round) {
  torch::NoGradGuard no_grad;
  const auto& plan = *ctx.plan;
  const int s = ctx.role.stage, stages = plan.num_stages();
  const int my_tp = tp_of(plan, s, ctx.role.replica);
  const int seq = ctx.module->model().sequence, hidden = ctx.module->model().hidden;
  const bool first = s == 0, last = s == stages - 1;
  const std::uint64_t per_round = static_cast<std::uint64_t>(batches) * ctx.micro_batches;
  struct pending {
    std::unique_ptr<comm::request> request;
    torch::Tensor buffer;
  };
  std::vector<pending> sends;
  double loss_sum = 0;
  for (int b = 0; b < batches; ++b) {
    for (int m = 0; m < ctx.micro_batches; ++m) {
      if (replica_of(plan, s, m) != ctx.role.replica) continue;
      const std::uint64_t tag = evaluation_tag_bit | (round * per_round + b * ctx.micro_batches + m);
      torch::Tensor input, targets;
      if (first || last) {
        auto tokens = ctx.tokens(b, m);
        if (first) input = tokens.narrow(1, 0, seq).contiguous();
        if (last) targets = tokens.narrow(1, 1, seq).contiguous();
      }
      if (!first) {
        const int prev = replica_of(plan, s - 1, m);
        const int src = global_rank_of(plan, {s - 1, prev, ctx.role.tp_rank % tp_of(plan, s - 1, prev)});
        input = torch::empty({plan.micro_batch, seq, hidden}, torch::TensorOptions().device(ctx.device));
        auto st = ctx.p2p->irecv(view_of(input), src, tag)->wait(ctx.timeout);
        if (st) throw std::runtime_error("validation activations: " + st->to_string());
      }
      auto out = ctx.module->forward(input, targets);
      if (last) {
        loss_sum += out.item<double>();
        continue;
      }
      auto payload = out.contiguous();
      const int next = replica_of(plan, s + 1, m);
      for (int k = 0; k < tp_of(plan, s + 1, next); ++k) {
        if (k % my_tp != ctx.role.tp_rank) continue;
        const int dst = global_rank_of(plan, {s + 1, next, k});
        sends.push_back({ctx.p2p->isend(view_of(payload), dst, tag), payload});
      }
    }
  }
  for (auto& p : sends)
    if (auto st = p.request->wait(ctx.timeout)) throw std::runtime_error("validation send: " + st->to_string());
  // Each micro-batch's loss counts once: TP rank 0 of the last stage's replica that ran it.
  auto total = torch::tensor({last && ctx.role.tp_rank == 0 ? loss_sum : 0.0}, torch::kDouble).to(ctx.device);
  if (auto st = ctx.world->all_reduce({total.data_ptr(), 1, comm::element_type::f64}))
    throw std::runtime_error("validation loss all-reduce: " + st->to_string());
  return total.cpu().item<double>() / static_cast<double>(per_round);
}

}  // namespace sailor::train::detail
