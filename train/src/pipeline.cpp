// The 1F1B schedule of one iteration on one rank (see pipeline.hpp).
#include "pipeline.hpp"

namespace sailor::train {

pipeline_pass::pipeline_pass(stage_executor::impl& rank, int iteration,
                             iteration_telemetry& telemetry)
    : rank_(rank),
      iteration_(iteration),
      tel_(telemetry),
      recompute_(rank.plan.stages[rank.role.stage].recompute),
      overlap_(!rank.dp_groups.empty()),
      last_micro_batch_(rank.ops.back().micro_batch) {}

void pipeline_pass::run() {
  // Every receive of the iteration up front, so that a peer's send never waits for us.
  post_receives();
  for (const auto& op : rank_.ops) {
    if (op.forward)
      forward(op.micro_batch);
    else
      backward(op.micro_batch);
  }
  wait_sends();
}

void pipeline_pass::post_receives() {
  const auto& plan = rank_.plan;
  const int s = rank_.role.stage;
  const auto shape = std::vector<std::int64_t>{plan.micro_batch, rank_.model.sequence,
                                               rank_.model.hidden};
  auto post = [&](int stage, int m, int direction) {
    const int replica = replica_of(plan, stage, m);
    const int from_tp = rank_.tp_of(stage, replica);
    const int src = global_rank_of(plan, {stage, replica, rank_.role.tp_rank % from_tp});
    transfer t;
    t.buffer = torch::empty(shape, torch::TensorOptions().device(rank_.device));
    t.request = rank_.p2p->irecv(view_of(t.buffer), src,
                                 tag_of(iteration_, rank_.micro_batches, m, direction));
    return t;
  };
  for (const auto& op : rank_.ops) {
    if (!op.forward) continue;
    const int m = op.micro_batch;
    if (!rank_.first_stage()) activations_[m] = post(s - 1, m, 0);
    if (!rank_.last_stage()) gradients_[m] = post(s + 1, m, 1);
  }
}

void pipeline_pass::wait_for(transfer& t) {
  auto start = clock_type::now();
  auto st = t.request->wait(rank_.options.timeout);
  tel_.recv_wait_s += seconds_since(start);
  if (st) throw std::runtime_error(st->to_string());
}

std::vector<segment> pipeline_pass::forward_segments(const torch::Tensor& input,
                                                     const torch::Tensor& targets) {
  auto& module = *rank_.module;
  std::vector<segment> segments;
  torch::Tensor x = input;
  for (int layer = module.first_layer(); layer < module.end_layer(); ++layer) {
    auto in = layer == module.first_layer() ? x : x.detach().requires_grad_(true);
    x = module.forward_layer(layer, in, targets);
    segments.push_back({in, x});
  }
  return segments;
}

void pipeline_pass::forward(int m) {
  const int seq = rank_.model.sequence;
  torch::Tensor input, targets;
  if (rank_.first_stage() || rank_.last_stage()) {
    const auto data_start = clock_type::now();
    auto tokens = rank_.tokens_of(iteration_, m);
    tel_.data_s += seconds_since(data_start);
    if (rank_.first_stage()) input = tokens.narrow(1, 0, seq).contiguous();
    if (rank_.last_stage()) targets = tokens.narrow(1, 1, seq).contiguous();
  }
  if (!rank_.first_stage()) {
    wait_for(activations_[m]);
    input = activations_[m].buffer.requires_grad_(true);
    activations_.erase(m);
  }
  auto start = clock_type::now();
  torch::Tensor out;
  if (m == last_micro_batch_ && !recompute_ && overlap_) {
    last_segments_ = forward_segments(input, targets);
    out = last_segments_.back().output;
  } else if (recompute_) {
    // Keep only the stage input; the backward runs the forward again with a graph.
    torch::NoGradGuard no_grad;
    out = rank_.module->forward(input, targets);
  } else {
    out = rank_.module->forward(input, targets);
  }
  compute_s_ += seconds_since(start);
  const int s = rank_.role.stage;
  if (rank_.last_stage())
    loss_sum_ += out.item<double>();
  else
    send_to(s + 1, replica_of(rank_.plan, s + 1, m), out.detach().contiguous(), m, 0);
  inputs_[m] = input;
  outputs_[m] = out;
  if (recompute_) saved_targets_[m] = targets;
  ++tel_.micro_batches;
}

void pipeline_pass::backward(int m) {
  torch::Tensor grad;
  if (rank_.last_stage()) {
    grad = torch::full({}, 1.0 / rank_.micro_batches, torch::TensorOptions().device(rank_.device));
  } else {
    wait_for(gradients_[m]);
    grad = gradients_[m].buffer;
  }
  auto start = clock_type::now();
  if (m == last_micro_batch_ && overlap_) {
    // Layer by layer, handing each finished layer to the data-parallel reducer.
    const int first_layer = rank_.module->first_layer();
    if (recompute_) last_segments_ = forward_segments(inputs_[m], saved_targets_[m]);
    reducer_ = std::make_unique<gradient_reducer>(
      [&rank = rank_](int layer) { rank.reduce_layer(layer); }, first_layer,
      rank_.module->end_layer());
    for (int k = static_cast<int>(last_segments_.size()) - 1; k >= 0; --k) {
      torch::autograd::backward({last_segments_[k].output}, {grad});
      reducer_->mark_ready(first_layer + k);
      if (k > 0) grad = last_segments_[k].input.grad();
    }
    last_segments_.clear();
  } else {
    if (recompute_) outputs_[m] = rank_.module->forward(inputs_[m], saved_targets_[m]);
    torch::autograd::backward({outputs_[m]}, {grad});
  }
  compute_s_ += seconds_since(start);
  gradients_.erase(m);
  const int s = rank_.role.stage;
  if (!rank_.first_stage())
    send_to(s - 1, replica_of(rank_.plan, s - 1, m), inputs_[m].grad().contiguous(), m, 1);
  inputs_.erase(m);
  outputs_.erase(m);
  saved_targets_.erase(m);
}

void pipeline_pass::send_to(int stage, int replica, const torch::Tensor& payload, int m,
                            int direction) {
  for (int k = 0; k < rank_.tp_of(stage, replica); ++k) {
    if (k % rank_.my_tp != rank_.role.tp_rank) continue;
    const int dst = global_rank_of(rank_.plan, {stage, replica, k});
    sends_.push_back({rank_.p2p->isend(view_of(payload), dst,
                                       tag_of(iteration_, rank_.micro_batches, m, direction)),
                      payload});
  }
}

void pipeline_pass::wait_sends() {
  auto start = clock_type::now();
  for (auto& t : sends_) {
    auto st = t.request->wait(rank_.options.timeout);
    if (st) throw std::runtime_error(st->to_string());
  }
  tel_.send_wait_s = seconds_since(start);
}

}  // namespace sailor::train
