// DiLoCo's outer loop on one rank (local_sgd.hpp).
#include "local_sgd.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <sailor/config/log.hpp>

namespace sailor::train::detail {

// One thread running posted tasks in order: the exchanges of one rank run one at a time, in
// the order every member of their groups starts them.
class serial_worker {
public:
  serial_worker() : thread_([this] { loop(); }) {}
  ~serial_worker() {
    {
      std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  std::shared_future<std::string> post(std::function<std::string()> task) {
    std::packaged_task<std::string()> packaged(std::move(task));
    auto done = packaged.get_future().share();
    {
      std::lock_guard lock{mutex_};
      tasks_.push_back(std::move(packaged));
    }
    changed_.notify_all();
    return done;
  }

private:
  void loop() {
    for (;;) {
      std::packaged_task<std::string()> task;
      {
        std::unique_lock lock{mutex_};
        changed_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::packaged_task<std::string()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

local_sgd::local_sgd(std::vector<torch::Tensor> params, const std::vector<int>& layer_of, int inner_steps,
                     const config::data_parallel_options& options, outer_groups groups, std::string who)
    : params_(std::move(params)), inner_steps_(std::max(1, inner_steps)), options_(options),
      groups_(groups), who_(std::move(who)), worker_(std::make_unique<serial_worker>()) {
  options_.overlap_steps = std::clamp(options_.overlap_steps, 0, inner_steps_ - 1);
  std::vector<std::int64_t> numel;
  for (const auto& p : params_) numel.push_back(p.numel());
  fragments_ = fragments_by_layer(numel, layer_of, options_.fragments);
  reset();
}

local_sgd::~local_sgd() {
  worker_.reset();  // finishes what is in flight (its groups fail it when aborted)
}

void local_sgd::reset() {
  for (auto& p : pending_) p.done.wait();
  pending_.clear();
  torch::NoGradGuard no_grad;
  anchor_.clear();
  momentum_.clear();
  for (const auto& p : params_) {
    anchor_.push_back(p.detach().clone());
    momentum_.push_back(torch::zeros_like(p));
  }
}

void local_sgd::load(const outer_tensors& state) {
  reset();
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    anchor_[i].copy_(state.anchor.at(i));
    momentum_[i].copy_(state.momentum.at(i));
  }
}

// Fragment f of P is exchanged after every H-th iteration counted from f * H / P.
bool local_sgd::due(int fragment, int completed) const {
  const int shift = fragment * inner_steps_ / static_cast<int>(fragments_.size());
  return completed > shift && (completed - shift) % inner_steps_ == 0;
}

double local_sgd::after_iteration(int completed) {
  const auto start_time = std::chrono::steady_clock::now();
  auto apply_due = [&] {
    while (!pending_.empty() && pending_.front().apply_at <= completed) {
      apply(pending_.front());
      pending_.pop_front();
    }
  };
  apply_due();
  for (int f = 0; f < fragments(); ++f)
    if (due(f, completed)) start(f, completed);
  apply_due();  // overlap 0: what was started now
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
}

void local_sgd::finish(int completed) {
  while (!pending_.empty()) {
    apply(pending_.front());
    pending_.pop_front();
  }
  const int overlap = options_.overlap_steps;
  options_.overlap_steps = 0;
  for (int f = 0; f < fragments(); ++f) {
    start(f, completed);
    apply(pending_.front());
    pending_.pop_front();
  }
  options_.overlap_steps = overlap;
}

void local_sgd::start(int fragment, int completed) {
  torch::NoGradGuard no_grad;
  pending p;
  p.fragment = fragment;
  p.apply_at = completed + options_.overlap_steps;
  std::vector<torch::Tensor> deltas;
  const auto [begin, end] = fragments_[fragment];
  for (std::size_t i = begin; i < end; ++i) {
    p.sent.push_back(params_[i].detach().clone());
    deltas.push_back((anchor_[i] - p.sent.back()).reshape({-1}));
  }
  p.average = torch::cat(deltas).contiguous();
  auto flat = p.average;
  p.done = worker_->post([this, flat]() mutable { return exchange(flat); });
  pending_.push_back(std::move(p));
}

// On the worker: the leaders' mean of their pseudo-gradients, then the leader's to its region.
std::string local_sgd::exchange(torch::Tensor& flat) {
  try {
    const std::int64_t n = flat.numel();
    if (auto* group = groups_.exchange) {
      if (options_.compression == config::delta_compression::int8) {
        const auto bytes = static_cast<std::size_t>(int8_bytes(n));
        std::vector<std::uint8_t> mine(bytes), all(bytes * static_cast<std::size_t>(group->size()));
        encode_int8({flat.data_ptr<float>(), static_cast<std::size_t>(n)}, mine.data());
        if (auto st = group->all_gather({mine.data(), bytes, comm::element_type::u8},
                                        {all.data(), all.size(), comm::element_type::u8}))
          return st->to_string();
        flat.zero_();
        for (int m = 0; m < group->size(); ++m)
          add_decoded_int8(all.data() + m * bytes, {flat.data_ptr<float>(), static_cast<std::size_t>(n)});
        payload_bytes_ += static_cast<std::int64_t>(bytes);
      } else {
        if (auto st = group->all_reduce({flat.data_ptr(), static_cast<std::size_t>(n), comm::element_type::f32}))
          return st->to_string();
        payload_bytes_ += 4 * n;
      }
      flat.div_(group->size());
    }
    if (auto* sync = groups_.sync)
      if (auto st = sync->broadcast({flat.data_ptr(), static_cast<std::size_t>(n), comm::element_type::f32},
                                    groups_.sync_root))
        return st->to_string();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// The outer step on the anchor, then the parameters at the new anchor plus what the inner
// steps added since the fragment was sent.
void local_sgd::apply(pending& p) {
  if (auto failed = p.done.get(); !failed.empty())
    throw std::runtime_error(who_ + " DiLoCo exchange of fragment " + std::to_string(p.fragment) + ": " + failed);
  torch::NoGradGuard no_grad;
  const double mu = options_.outer_momentum, lr = options_.outer_lr;
  const bool nesterov = options_.outer_optimizer == config::outer_optimizer_kind::nesterov;
  const auto [begin, end] = fragments_[p.fragment];
  std::int64_t at = 0;
  for (std::size_t i = begin; i < end; ++i) {
    auto delta = p.average.narrow(0, at, params_[i].numel()).view(params_[i].sizes());
    at += params_[i].numel();
    momentum_[i].mul_(mu).add_(delta);
    anchor_[i].sub_(nesterov ? delta.add(momentum_[i], mu) : momentum_[i], lr);
    params_[i].sub_(p.sent[i - begin]).add_(anchor_[i]);
  }
}

}  // namespace sailor::train::detail
