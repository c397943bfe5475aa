// The stage executor's training step (impl::run), learning-rate schedule, validation, state
// and checkpoints; creation and communicators are in executor_setup.cpp.
#include "executor_impl.hpp"

namespace sailor::train {

iteration_telemetry stage_executor::impl::run(int iteration) {
  iteration_telemetry tel;
  tel.iteration = iteration;
  tel.tokens = static_cast<std::int64_t>(plan.global_batch) * model.sequence;
  auto iteration_start = clock_type::now();
  tp_seconds = 0;
  const int mb = plan.micro_batch, seq = model.sequence, hidden = model.hidden;
  const int s = role.stage;

  if (!flat_bound()) bind_flat_gradients();
  if (flat.buffer.defined()) flat.buffer.zero_();
  flat.pending_end = -1;

  // Post every receive of the iteration up front, so that a peer's send never waits for us.
  std::map<int, transfer> activations, gradients;
  for (const auto& op : ops) {
    if (!op.forward) continue;
    int m = op.micro_batch;
    if (!first_stage()) {
      int from_tp = tp_of(s - 1, replica_of(plan, s - 1, m));
      int src = global_rank_of(plan, {s - 1, replica_of(plan, s - 1, m), role.tp_rank % from_tp});
      transfer t;
      t.buffer = torch::empty({mb, seq, hidden}, torch::TensorOptions().device(device));
      t.request = p2p->irecv(view_of(t.buffer), src, tag_of(iteration, micro_batches, m, 0));
      activations[m] = std::move(t);
    }
    if (!last_stage()) {
      int from_tp = tp_of(s + 1, replica_of(plan, s + 1, m));
      int src = global_rank_of(plan, {s + 1, replica_of(plan, s + 1, m), role.tp_rank % from_tp});
      transfer t;
      t.buffer = torch::empty({mb, seq, hidden}, torch::TensorOptions().device(device));
      t.request = p2p->irecv(view_of(t.buffer), src, tag_of(iteration, micro_batches, m, 1));
      gradients[m] = std::move(t);
    }
  }

  auto wait_for = [&](transfer& t) {
    auto start = clock_type::now();
    auto st = t.request->wait(options.timeout);
    tel.recv_wait_s += seconds_since(start);
    if (st) throw std::runtime_error(st->to_string());
  };

  std::vector<transfer> sends;
  std::map<int, torch::Tensor> inputs, outputs, saved_targets;
  const bool recompute = plan.stages[s].recompute;
  const int first_layer = module->first_layer(), end_layer = module->end_layer();
  // The last backward of the iteration overlaps the data-parallel all-reduce.
  const bool overlap = !dp_groups.empty();
  const int last_micro_batch = ops.back().micro_batch;
  std::vector<segment> last_segments;
  std::unique_ptr<gradient_reducer> reducer;
  auto forward_segments = [&](const torch::Tensor& input, const torch::Tensor& targets) {
    std::vector<segment> segments;
    torch::Tensor x = input;
    for (int layer = first_layer; layer < end_layer; ++layer) {
      auto in = layer == first_layer ? x : x.detach().requires_grad_(true);
      x = module->forward_layer(layer, in, targets);
      segments.push_back({in, x});
    }
    return segments;
  };
  double compute = 0, loss_sum = 0;
  const double scale = 1.0 / micro_batches;
  for (const auto& op : ops) {
    const int m = op.micro_batch;
    if (op.forward) {
      torch::Tensor input, targets;
      if (first_stage() || last_stage()) {
        auto tokens = tokens_of(iteration, m);
        if (first_stage()) input = tokens.narrow(1, 0, seq).contiguous();
        if (last_stage()) targets = tokens.narrow(1, 1, seq).contiguous();
      }
      if (!first_stage()) {
        wait_for(activations[m]);
        input = activations[m].buffer.requires_grad_(true);
        activations.erase(m);
      }
      auto start = clock_type::now();
      torch::Tensor out;
      if (m == last_micro_batch && !recompute && overlap) {
        last_segments = forward_segments(input, targets);
        out = last_segments.back().output;
      } else if (recompute) {
        // Keep only the stage input; the backward runs the forward again with a graph.
        torch::NoGradGuard no_grad;
        out = module->forward(input, targets);
      } else {
        out = module->forward(input, targets);
      }
      compute += seconds_since(start);
      if (last_stage()) {
        loss_sum += out.item<double>();
      } else {
        auto payload = out.detach().contiguous();
        int next = replica_of(plan, s + 1, m);
        for (int k = 0; k < tp_of(s + 1, next); ++k) {
          if (k % my_tp != role.tp_rank) continue;
          int dst = global_rank_of(plan, {s + 1, next, k});
          sends.push_back({p2p->isend(view_of(payload), dst, tag_of(iteration, micro_batches, m, 0)),
                           payload});
        }
      }
      inputs[m] = input;
      outputs[m] = out;
      if (recompute) saved_targets[m] = targets;
      ++tel.micro_batches;
    } else {
      torch::Tensor grad;
      if (last_stage()) {
        grad = torch::full({}, scale, torch::TensorOptions().device(device));
      } else {
        wait_for(gradients[m]);
        grad = gradients[m].buffer;
      }
      auto start = clock_type::now();
      if (m == last_micro_batch && overlap) {
        // Layer by layer, handing each finished layer to the data-parallel reducer.
        if (recompute) last_segments = forward_segments(inputs[m], saved_targets[m]);
        reducer = std::make_unique<gradient_reducer>([this](int layer) { reduce_layer(layer); },
                                                     first_layer, end_layer);
        for (int k = static_cast<int>(last_segments.size()) - 1; k >= 0; --k) {
          torch::autograd::backward({last_segments[k].output}, {grad});
          reducer->mark_ready(first_layer + k);
          if (k > 0) grad = last_segments[k].input.grad();
        }
        last_segments.clear();
      } else {
        if (recompute) outputs[m] = module->forward(inputs[m], saved_targets[m]);
        torch::autograd::backward({outputs[m]}, {grad});
      }
      compute += seconds_since(start);
      gradients.erase(m);
      if (!first_stage()) {
        auto payload = inputs[m].grad().contiguous();
        int prev = replica_of(plan, s - 1, m);
        for (int i = 0; i < tp_of(s - 1, prev); ++i) {
          if (i % my_tp != role.tp_rank) continue;
          int dst = global_rank_of(plan, {s - 1, prev, i});
          sends.push_back({p2p->isend(view_of(payload), dst, tag_of(iteration, micro_batches, m, 1)),
                           payload});
        }
      }
      inputs.erase(m);
      outputs.erase(m);
      saved_targets.erase(m);
    }
  }
  {
    auto start = clock_type::now();
    for (auto& t : sends) {
      auto st = t.request->wait(options.timeout);
      if (st) throw std::runtime_error(st->to_string());
    }
    tel.send_wait_s = seconds_since(start);
  }
  tel.compute_s = std::max(0.0, compute - tp_seconds);

  double dp_seconds = 0;
  if (reducer) {
    // What remains of the data-parallel all-reduce after the backward.
    auto start = clock_type::now();
    reducer->finish();
    reducer.reset();
    dp_seconds = seconds_since(start);
  }
  // The backward accumulates into the bound gradients in place; anything else would have
  // left reduced buffers unread.
  TORCH_CHECK(flat_bound(), "gradients are no longer views into the flat buffer");
  detail::sum_tied_gradients(plan, role, *module, world_reduce());

  // Loss and squared gradient norm over the whole plan in one all-reduce. Each piece of
  // every parameter counts once: replica 0 of each stage; replicated tensors on TP rank 0.
  auto opt_start = clock_type::now();
  double norm_sq = 0;
  if (role.replica == 0) {
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
  }
  auto totals = torch::tensor({last_stage() && role.tp_rank == 0 ? loss_sum : 0.0, norm_sq},
                              torch::kDouble).to(device);
  auto reduce_start = clock_type::now();
  auto st = world_reduce().all_reduce(view_of(totals));
  double world_seconds = seconds_since(reduce_start);
  if (st) throw std::runtime_error(st->to_string());
  totals = totals.cpu();
  tel.loss = totals[0].item<double>() / micro_batches;
  tel.grad_norm = std::sqrt(totals[1].item<double>());

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
  tel.all_reduce_s = tp_seconds + dp_seconds + world_seconds;
  tel.checkpoint_s = take_checkpoint(iteration);
  tel.total_s = seconds_since(iteration_start);
  return tel;
}


stage_executor::stage_executor(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
stage_executor::~stage_executor() = default;

result<iteration_telemetry> stage_executor::run_iteration(int iteration) {
  try {
    return impl_->run(iteration);
  } catch (const std::exception& e) {
    log::get("train")->error("{} iteration {} failed: {}", impl_->who, iteration, e.what());
    return failed(impl_->who + " iteration " + std::to_string(iteration) + ": " + e.what());
  }
}

train_options options_from(const config::job& job) {
  train_options o;
  o.seed = static_cast<std::uint64_t>(job.seed);
  o.optimizer = job.optimizer == config::optimizer_kind::sgd ? optimizer_kind::sgd : optimizer_kind::adamw;
  const auto& s = job.schedule;
  o.learning_rate = s.lr;
  o.min_learning_rate = s.min_lr;
  o.warmup_iterations = s.warmup_iterations;
  o.decay_iterations = s.decay_iterations;
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.weight_decay = s.weight_decay;
  o.clip_norm = s.grad_clip;
  o.data = job.data;
  o.eval_batches = job.eval_batches;
  return o;
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

result<double> stage_executor::validation_loss() {
  auto& st = *impl_;
  if (!st.file_data || st.file_data->tokens(models::data_split::validation) == 0)
    return failed(st.who + " validation loss: the job has no data with a validation part",
                  error_kind::invalid_input);
  try {
    detail::evaluation_context ctx;
    ctx.plan = &st.plan;
    ctx.role = st.role;
    ctx.micro_batches = st.micro_batches;
    ctx.world = &st.world_reduce();
    ctx.p2p = st.p2p.get();
    ctx.module = st.module.get();
    ctx.device = st.device;
    ctx.timeout = st.options.timeout;
    ctx.tokens = [&st](int b, int m) { return st.tokens_of(b, m, models::data_split::validation); };
    return detail::evaluate_loss(ctx, std::max(1, st.options.eval_batches), st.evaluations++);
  } catch (const std::exception& e) {
    log::get("train")->error("{} validation loss failed: {}", st.who, e.what());
    return failed(st.who + " validation loss: " + e.what());
  }
}

result<std::vector<char>> stage_executor::save_state() const {
  try {
    torch::serialize::OutputArchive archive, params, optim;
    for (const auto& p : impl_->module->parameters()) {
      std::string key = p.name;
      std::replace(key.begin(), key.end(), '.', '_');
      params.write(key, p.tensor.detach());
    }
    impl_->optimizer->save(optim);
    archive.write("params", params);
    archive.write("optimizer", optim);
    std::ostringstream out;
    archive.save_to(out);
    auto bytes = out.str();
    return std::vector<char>(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    return failed(impl_->who + " save_state: " + e.what());
  }
}

status stage_executor::load_state(const std::vector<char>& bytes) {
  try {
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    torch::serialize::InputArchive archive, params, optim;
    archive.load_from(in);
    archive.read("params", params);
    archive.read("optimizer", optim);
    torch::NoGradGuard no_grad;
    for (auto& p : impl_->module->parameters()) {
      std::string key = p.name;
      std::replace(key.begin(), key.end(), '.', '_');
      torch::Tensor t;
      params.read(key, t);
      if (!t.sizes().equals(p.tensor.sizes()))
        return failed(impl_->who + " load_state: " + p.name + " has another shape",
                      error_kind::invalid_input);
      p.tensor.copy_(t);
    }
    impl_->optimizer->load(optim);
    return {};
  } catch (const std::exception& e) {
    return failed(impl_->who + " load_state: " + e.what(), error_kind::invalid_input);
  }
}

std::int64_t stage_executor::num_parameters() const { return impl_->module->num_parameters(); }
const rank_role& stage_executor::role() const { return impl_->role; }

double stage_executor::impl::take_checkpoint(int iteration) {
  if (!checkpoints) return 0;
  if ((iteration + 1) % options.checkpoint_every != 0 && iteration + 1 != options.checkpoint_final)
    return 0;
  return checkpoints->take(iteration + 1, *module, *optimizer);
}

status stage_executor::restore(const std::string& dir, int iterations) {
  try {
    return detail::restore_checkpoint(dir, iterations, impl_->model, impl_->options, *impl_->module,
                                      *impl_->optimizer, impl_->who);
  } catch (const std::exception& e) {
    return failed(impl_->who + " restore of " + dir + " after " + std::to_string(iterations) +
                      " iterations: " + e.what(),
                  error_kind::invalid_input);
  }
}

result<state_shard> stage_executor::state_snapshot(int iterations) const {
  try {
    return detail::encode_shard(iterations, impl_->model, impl_->plan, impl_->role,
                                impl_->options.optimizer, *impl_->module, *impl_->optimizer);
  } catch (const std::exception& e) {
    return failed(impl_->who + " state snapshot after " + std::to_string(iterations) +
                  " iterations: " + e.what());
  }
}

std::string stage_executor::last_checkpoint_file() const {
  return impl_->checkpoints ? impl_->checkpoints->last_written() : std::string{};
}

std::string stage_executor::take_checkpoint_failure() {
  return impl_->checkpoints ? impl_->checkpoints->take_failure() : std::string{};
}

status stage_executor::flush_checkpoints() {
  if (!impl_->checkpoints) return {};
  return impl_->checkpoints->flush();
}

}  // namespace sailor::train

