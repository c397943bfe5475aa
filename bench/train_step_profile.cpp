// Where one training step of a stage module spends its CPU time, single process, no
// communication: zeroing gradients, forward, backward, gradient norm, optimizer step. The
// counterpart of scripts/step_reference.py (the same phases of the PyTorch model that
// scripts/ddp_reference.py trains), so that both sides can be compared phase by phase.
//
//   train_step_profile [--iterations N] [--layers L] [--hidden H] [--heads A]
//                      [--sequence S] [--vocabulary V] [--batch B] [--segments]
//                      [--trace FILE] [--head]
//
// Times are thread CPU seconds (the process runs one torch thread): less sensitive to other
// load than wall time, yet still noisy on a shared machine (run both sides alternately, several
// times). --segments cuts the graph at layer boundaries, as the executor does for the
// micro-batch whose backward overlaps the data-parallel all-reduce. --trace writes the
// measured iterations' operators as a Chrome trace (LibTorch's legacy profiler). --head
// compares the vocabulary-parallel cross-entropy on one shard with torch's fused one.
// The gradient norm and the optimizer step are the executor's: fp32 dot products, and the
// fused AdamW step (fused_adamw.hpp).

#include <sailor/models/gpt.hpp>
#include <sailor/models/shapes.hpp>
#include <sailor/models/synthetic_data.hpp>

#include <time.h>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "../train/src/fused_adamw.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20, layers = 4, hidden = 128, heads = 8, sequence = 64, vocabulary = 4096,
      batch = 8;
  bool segments = false, head = false;
  std::string trace;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::stoi(argv[++i]) : 0; };
    if (a == "--iterations") iterations = next();
    else if (a == "--layers") layers = next();
    else if (a == "--hidden") hidden = next();
    else if (a == "--heads") heads = next();
    else if (a == "--sequence") sequence = next();
    else if (a == "--vocabulary") vocabulary = next();
    else if (a == "--batch") batch = next();
    else if (a == "--segments") segments = true;
    else if (a == "--head") head = true;
    else if (a == "--trace" && i + 1 < argc) trace = argv[++i];
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  torch::set_num_threads(1);
  if (head) {
    // Cross-entropy forward and backward: ours (vocabulary-parallel, one shard) and torch's.
    auto logits = torch::randn({batch * sequence, vocabulary}).requires_grad_(true);
    auto targets = torch::randint(0, vocabulary, {batch * sequence}, torch::kLong);
    double ours = 0, theirs = 0;
    for (int it = 0; it < 2 * iterations; ++it) {
      double t0 = thread_cpu();
      sailor::models::vocab_parallel_cross_entropy(logits, targets, 0, {}).mean().backward();
      double t1 = thread_cpu();
      torch::nn::functional::cross_entropy(logits, targets).backward();
      double t2 = thread_cpu();
      if (it >= 2) ours += t1 - t0, theirs += t2 - t1;
    }
    std::printf("cross-entropy fwd+bwd: ours %.2f ms, torch %.2f ms\n", ours / (2 * iterations - 2) * 1e3,
                theirs / (2 * iterations - 2) * 1e3);
    return 0;
  }
  sailor::config::model_shape m = sailor::models::tiny_gpt_shape();
  m.num_layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.sequence = sequence;
  m.vocabulary = vocabulary;
  sailor::models::stage_module module(m, 0, m.num_all_layers(), {}, 1);
  torch::optim::AdamW optimizer(module.tensors(), torch::optim::AdamWOptions(1e-3).weight_decay(0.0));
  sailor::models::markov_dataset data(vocabulary, sequence, 1, 0);

  const char* names[] = {"zero_grad", "forward", "backward", "grad_norm", "optimizer", "total"};
  std::vector<double> sums(6, 0.0);
  const int warmup = 2;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  for (int it = 0; it < warmup + iterations; ++it) {
    if (it == warmup && !trace.empty())
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(trace);
    auto tokens = torch::empty({batch, sequence + 1}, torch::kLong);
    data.fill(static_cast<std::int64_t>(it) * batch, batch, tokens.data_ptr<std::int64_t>());
    auto input = tokens.narrow(1, 0, sequence).contiguous();
    auto targets = tokens.narrow(1, 1, sequence).contiguous();
    double t[6];
    t[0] = thread_cpu();
    for (auto& p : module.parameters()) {
      if (p.tensor.grad().defined())
        p.tensor.mutable_grad().zero_();
      else
        p.tensor.mutable_grad() = torch::zeros_like(p.tensor);
    }
    t[1] = thread_cpu();
    std::vector<std::pair<torch::Tensor, torch::Tensor>> cuts;
    torch::Tensor loss;
    if (segments) {
      torch::Tensor x = input;
      for (int layer = 0; layer < m.num_all_layers(); ++layer) {
        auto in = layer == 0 ? x : x.detach().requires_grad_(true);
        x = module.forward_layer(layer, in, targets);
        cuts.emplace_back(in, x);
      }
      loss = x;
    } else {
      loss = module.forward(input, targets);
    }
    t[2] = thread_cpu();
    if (segments) {
      torch::Tensor grad = torch::ones({});
      for (int k = static_cast<int>(cuts.size()) - 1; k >= 0; --k) {
        torch::autograd::backward({cuts[k].second}, {grad});
        if (k > 0) grad = cuts[k].first.grad();
      }
    } else {
      loss.backward();
    }
    t[3] = thread_cpu();
    double norm_sq = 0;
    for (const auto& p : module.parameters()) {
      auto g = p.tensor.grad().reshape({-1});
      norm_sq += g.dot(g).item<double>();
    }
    t[4] = thread_cpu();
    if (!sailor::train::fused_adamw_step(optimizer)) optimizer.step();
    t[5] = thread_cpu();
    if (it < warmup) continue;
    for (int k = 0; k < 5; ++k) sums[k] += t[k + 1] - t[k];
    sums[5] += t[5] - t[0];
    (void)norm_sq;
  }
  profile.reset();
  std::printf("sailor stage_module, %d layers, hidden %d, batch %d x %d, %lld parameters%s\n",
              layers, hidden, batch, sequence, static_cast<long long>(module.num_parameters()),
              segments ? ", graph cut per layer" : "");
  for (int k = 0; k < 6; ++k) std::printf("  %-10s %8.2f ms\n", names[k], sums[k] / iterations * 1e3);
  return 0;
}
