// The stage executor's training step (impl::run: the pipeline schedule in pipeline.cpp, the
// gradient synchronisation in gradient_sync.cpp, the optimizer step in optimizer_step.cpp),
// validation and state; creation and communicators are in executor_setup.cpp.
#include "executor_impl.hpp"
#include "pipeline.hpp"

namespace sailor::train {

iteration_telemetry stage_executor::impl::run(int iteration) {
  iteration_telemetry tel;
  tel.iteration = iteration;
  tel.tokens = static_cast<std::int64_t>(plan.global_batch) * model.sequence;
  auto iteration_start = clock_type::now();
  tp_seconds = 0;
  if (!flat_bound()) bind_flat_gradients();
  if (flat.buffer.defined()) flat.buffer.zero_();
  flat.pending_end = -1;

  pipeline_pass pass{*this, iteration, tel};
  pass.run();
  tel.compute_s = std::max(0.0, pass.compute_s() - tp_seconds);
  const double dp_seconds = finish_gradient_sync(pass.take_reducer());
  const double world_seconds = step_optimizer(iteration, pass.loss_sum(), tel);
  tel.all_reduce_s = tp_seconds + dp_seconds + world_seconds;
  // DiLoCo: the exchanges due after this iteration, before its checkpoint; after the job's
  // last, the regions end on the same weights.
  if (outer) {
    tel.all_reduce_s += outer->after_iteration(iteration + 1);
    if (iteration + 1 == options.checkpoint_final) {
      const auto start = clock_type::now();
      outer->finish(iteration + 1);
      tel.all_reduce_s += seconds_since(start);
    }
  }
  tel.checkpoint_s = take_checkpoint(iteration);
  tel.total_s = seconds_since(iteration_start);
  return tel;
}

stage_executor::stage_executor(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

status stage_executor::finish_outer_steps(int completed) {
  if (!impl_->outer) return {};
  try {
    impl_->outer->finish(completed);
    return {};
  } catch (const std::exception& e) {
    return error::failed(impl_->who + " finishing DiLoCo's exchanges: " + e.what());
  }
}
stage_executor::~stage_executor() = default;

result<iteration_telemetry> stage_executor::run_iteration(int iteration) {
  try {
    return impl_->run(iteration);
  } catch (const non_finite_step& e) {  // logged where it is handled (the node names the iteration)
    auto out = error::failed(impl_->who + ": " + e.what());
    out.field = non_finite_field;
    return out;
  } catch (const std::exception& e) {
    log::get("train")->error("{} iteration {} failed: {}", impl_->who, iteration, e.what());
    return error::failed(impl_->who + " iteration " + std::to_string(iteration) + ": " + e.what());
  }
}

void set_schedule(train_options& o, const config::optimizer_schedule& s) {
  o.learning_rate = s.lr;
  o.min_learning_rate = s.min_lr;
  o.warmup_iterations = s.warmup_iterations;
  o.decay_iterations = s.decay_iterations;
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.weight_decay = s.weight_decay;
  o.clip_norm = s.grad_clip;
}

train_options options_from(const config::job& job) {
  train_options o;
  o.seed = static_cast<std::uint64_t>(job.seed);
  o.optimizer = job.optimizer == config::optimizer_kind::sgd ? optimizer_kind::sgd : optimizer_kind::adamw;
  set_schedule(o, job.schedule);
  o.data = job.data;
  o.eval_batches = job.eval_batches;
  o.outer = job.data_parallel;
  return o;
}

result<double> stage_executor::validation_loss() {
  auto& st = *impl_;
  if (!st.file_data || st.file_data->tokens(models::data_split::validation) == 0)
    return error::invalid_input(
        "", st.who + " validation loss: the job has no data with a validation part");
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
    return error::failed(st.who + " validation loss: " + e.what());
  }
}

// The groups built from the zone groups and the channel abort those again: aborts are
// idempotent.
void stage_executor::abort(const std::string& why) {
  auto& st = *impl_;
  log::get("train")->info("{} abandons its work: {}", st.who, why);
  if (st.world_zones) st.world_zones->abort(why);
  if (st.world) st.world->abort(why);
  if (st.tp_comm) st.tp_comm->abort(why);
  for (auto& g : st.dp_groups)
    if (g.comm) g.comm->abort(why);
  if (st.p2p) st.p2p->abort(why);
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
    return error::failed(impl_->who + " save_state: " + e.what());
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
        return error::invalid_input("", impl_->who + " load_state: " + p.name + " has another shape");
      p.tensor.copy_(t);
    }
    impl_->optimizer->load(optim);
    return impl_->continue_outer({}, {});
  } catch (const std::exception& e) {
    return error::invalid_input("", impl_->who + " load_state: " + e.what());
  }
}

std::int64_t stage_executor::num_parameters() const { return impl_->module->num_parameters(); }

std::uint64_t stage_executor::parameters_hash() const {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& p : impl_->module->parameters()) {
    auto t = p.tensor.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (std::size_t i = 0, n = static_cast<std::size_t>(t.nbytes()); i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

std::uint64_t stage_executor::channel_bytes_sent() const { return impl_->p2p ? impl_->p2p->bytes_sent() : 0; }

std::int64_t stage_executor::outer_payload_bytes() const { return impl_->outer ? impl_->outer->payload_bytes() : 0; }
const rank_role& stage_executor::role() const { return impl_->role; }

// DiLoCo: a fresh outer step from restored parameters (a checkpoint holds no outer state:
// the anchor is where the restored parameters are, the momentum zero).
status stage_executor::impl::continue_outer(status restored, const detail::outer_tensors& state) {
  if (restored || !outer) return restored;
  if (state.anchor.empty()) {
    outer->reset();
    log::get("train")->info("{} DiLoCo starts a fresh outer step from the restored parameters (what was "
                            "restored holds no outer state: a synchronous plan's, or a hand-over's)", who);
  } else {
    outer->load(state);
    log::get("train")->info("{} DiLoCo continues from the restored outer state (anchor and momentum)", who);
  }
  return restored;
}

status stage_executor::restore(const std::string& dir, int iterations) {
  try {
    detail::outer_tensors outer;
    auto st = detail::restore_checkpoint(dir, iterations, impl_->model, impl_->options, *impl_->module,
                                         *impl_->optimizer, impl_->who, impl_->outer ? &outer : nullptr);
    return impl_->continue_outer(st, outer);
  } catch (const std::exception& e) {
    return error::invalid_input("", impl_->who + " restore of " + dir + " after " + std::to_string(iterations) +
                                    " iterations: " + e.what());
  }
}

status stage_executor::restore(const std::vector<shard_input>& shards, int iterations) {
  try {
    detail::outer_tensors outer;
    auto st = detail::restore_shards(shards, iterations, impl_->model, impl_->options, *impl_->module,
                                     *impl_->optimizer, impl_->who, impl_->outer ? &outer : nullptr);
    return impl_->continue_outer(st, outer);
  } catch (const std::exception& e) {
    return error::invalid_input("", impl_->who + " restore of the state after " + std::to_string(iterations) +
                                    " iterations: " + e.what());
  }
}

result<state_shard> stage_executor::state_snapshot(int iterations) const {
  try {
    if (impl_->outer) {
      const auto outer = impl_->outer->state();
      return detail::encode_shard(iterations, impl_->model, impl_->plan, impl_->role, impl_->options.optimizer,
                                  *impl_->module, *impl_->optimizer, &outer);
    }
    return detail::encode_shard(iterations, impl_->model, impl_->plan, impl_->role,
                                impl_->options.optimizer, *impl_->module, *impl_->optimizer);
  } catch (const std::exception& e) {
    return error::failed(impl_->who + " state snapshot after " + std::to_string(iterations) +
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

