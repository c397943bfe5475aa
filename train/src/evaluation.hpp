#pragma once
// The validation loss of a plan: a forward-only pass over held-out batches through the
// pipeline (internal to the training runtime; includes LibTorch).
//
// Every rank of the plan calls evaluate_loss together. Micro-batch m of each batch goes
// through replica m % R_s of every stage s, as in training; a rank runs its micro-batches in
// order, receiving the previous stage's activations (blocking, bounded) and sending its own
// without waiting, so the pass cannot deadlock. The last stage sums its losses; one world
// all-reduce gives every rank the mean.

#include <chrono>
#include <cstdint>
#include <functional>

#include <torch/torch.h>

#include <sailor/train/executor.hpp>
#include <sailor/comm/channel.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/models/gpt.hpp>

namespace sailor::train::detail {

struct evaluation_context {
  const config::plan* plan = nullptr;
  rank_role role;
  int micro_batches = 0;  // per batch (global_batch / micro_batch)
  comm::communicator* world = nullptr;  // the loss all-reduce
  comm::channel* p2p = nullptr;         // activations between stages
  models::stage_module* module = nullptr;
  torch::Device device = torch::kCPU;
  std::chrono::milliseconds timeout{60000};
  /// Token rows [mb, seq + 1] of micro-batch m of validation batch b.
  std::function<torch::Tensor(int b, int m)> tokens;
};

/// Mean loss over `batches` validation batches. `round` numbers the evaluations of this
/// executor (their messages get tags of their own). Throws on a communication failure.
double evaluate_loss(const evaluation_context& ctx, int batches, std::uint64_t round);

}  // namespace sailor::train::detail
