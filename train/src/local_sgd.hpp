#pragma once
// DiLoCo's outer loop on one rank (plan.local_sgd; the job's data_parallel options): the
// regions train `inner_steps` iterations apart, then each region's leader exchanges its
// parameters' change since the last exchange (the pseudo-gradient, anchor - parameters) with
// the other regions' leaders, the average reaches the region's other replicas, and every
// replica takes the same outer step on its anchor (Nesterov or heavy-ball momentum). The
// parameters are cut into fragments by layer range, each exchanged at its own point of the H
// iterations (Streaming DiLoCo). An exchange runs on a thread of its own while training goes
// on; its result is applied `overlap_steps` iterations after it started, keeping the local
// progress made meanwhile: parameters = new anchor + (parameters now - parameters sent).
// Private to the training runtime: includes LibTorch.

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <sailor/comm/collective.hpp>
#include <sailor/config/job.hpp>

#include "int8_pack.hpp"

namespace sailor::train::detail {

/// The communicators of one rank's exchange (any may be null).
struct outer_groups {
  comm::communicator* exchange = nullptr;  ///< the regions' leaders; set on a leader only
  comm::communicator* sync = nullptr;      ///< the region's replicas of this stage and TP rank
  int sync_root = 0;                       ///< the leader's rank in `sync`
};

/// DiLoCo's outer state of a rank: per parameter, the anchor (the parameters after the last
/// outer step) and the outer momentum. The same on every replica of every region: the
/// checkpoint of replica 0 holds the job's.
struct outer_tensors {
  std::vector<torch::Tensor> anchor, momentum;
};

class serial_worker;

class local_sgd {
public:
  /// `params`: the stage's parameters (this rank's shards) in order; `layer_of`: each one's
  /// layer, non-decreasing. The anchor starts at the parameters as they are now.
  local_sgd(std::vector<torch::Tensor> params, const std::vector<int>& layer_of, int inner_steps,
            const config::data_parallel_options& options, outer_groups groups, std::string who);
  ~local_sgd();
  local_sgd(const local_sgd&) = delete;
  local_sgd& operator=(const local_sgd&) = delete;

  /// After `completed` iterations of the job: applies the exchanges due now (waiting for them
  /// if still in flight) and starts the fragments due now. Returns the seconds the training
  /// thread spent here; throws what an exchange failed with.
  double after_iteration(int completed);
  /// The end of training after `completed` iterations: applies what is in flight, then
  /// exchanges every fragment once more without overlap, so that every region ends with the
  /// same weights (every rank of the plan calls it at the same point). Throws as above.
  void finish(int completed);
  /// A fresh outer step from the parameters as they are now: anchor = parameters, momentum
  /// zero, nothing in flight (after a restore).
  void reset();
  /// The outer state now (views of it: copy before the next iteration).
  outer_tensors state() const { return {anchor_, momentum_}; }
  /// Continues from a checkpoint's outer state (one tensor per parameter, their shapes).
  void load(const outer_tensors& state);
  int fragments() const { return static_cast<int>(fragments_.size()); }
  /// Bytes this rank put on the wire in exchanges so far (its payloads; leaders only).
  std::int64_t payload_bytes() const { return payload_bytes_.load(); }

private:
  struct pending {
    int fragment = 0;
    int apply_at = 0;
    std::vector<torch::Tensor> sent;  // the fragment's parameters when it was sent
    torch::Tensor average;            // flat: the regions' mean pseudo-gradient
    std::shared_future<std::string> done;  // "" or what went wrong
  };
  bool due(int fragment, int completed) const;
  void start(int fragment, int completed);
  void apply(pending& p);
  std::string exchange(torch::Tensor& flat);

  std::vector<torch::Tensor> params_, anchor_, momentum_;
  std::vector<std::pair<std::size_t, std::size_t>> fragments_;  // [begin, end) parameter indices
  int inner_steps_;
  config::data_parallel_options options_;
  outer_groups groups_;
  std::string who_;
  std::deque<pending> pending_;
  std::atomic<std::int64_t> payload_bytes_{0};
  std::unique_ptr<serial_worker> worker_;
};

}  // namespace sailor::train::detail
