#pragma once
// One iteration of the 1F1B pipeline schedule on one rank (schedule.hpp orders the ops): every
// receive posted up front, forwards and backwards in the schedule's order, activations sent
// to the next stage and input gradients to the previous one, and the sends waited for at the
// end. When the stage has data-parallel groups, the last micro-batch's backward runs layer by
// layer and hands each finished layer to a gradient_reducer, so that the all-reduce overlaps
// the rest of the backward (gradient_sync.cpp waits for it). Private: includes LibTorch.
#include <map>
#include <memory>
#include <vector>

#include "executor_impl.hpp"

namespace sailor::train {

class pipeline_pass {
public:
  pipeline_pass(stage_executor::impl& rank, int iteration, iteration_telemetry& telemetry);

  /// Runs the schedule; a failed transfer throws (stage_executor::run_iteration reports it).
  void run();
  /// Seconds spent in forward and backward (TP collectives included).
  double compute_s() const { return compute_s_; }
  /// Sum of the micro-batches' losses (last stage; 0 elsewhere).
  double loss_sum() const { return loss_sum_; }
  /// The reducer still all-reducing the last layers (null without data-parallel groups).
  std::unique_ptr<gradient_reducer> take_reducer() { return std::move(reducer_); }

private:
  void post_receives();
  void wait_for(transfer& t);
  void forward(int m);
  void backward(int m);
  // Sends `payload` of micro-batch m to the TP ranks of (stage, replica) this rank feeds.
  void send_to(int stage, int replica, const torch::Tensor& payload, int m, int direction);
  void wait_sends();
  std::vector<segment> forward_segments(const torch::Tensor& input, const torch::Tensor& targets);

  stage_executor::impl& rank_;
  const int iteration_;
  iteration_telemetry& tel_;
  const bool recompute_;
  const bool overlap_;  // the last backward overlaps the data-parallel all-reduce
  const int last_micro_batch_;
  std::map<int, transfer> activations_, gradients_;  // posted receives
  std::vector<transfer> sends_;
  std::map<int, torch::Tensor> inputs_, outputs_, saved_targets_;
  std::vector<segment> last_segments_;
  std::unique_ptr<gradient_reducer> reducer_;
  double compute_s_ = 0, loss_sum_ = 0;
};

}  // namespace sailor::train
