#pragma once
// The stage executor's state and the helpers its files share (executor.cpp: the training
// step, pipeline.cpp, gradient_sync.cpp and optimizer_step.cpp: its parts; executor_setup.cpp:
// creation, communicators, gradient buckets). Private to the
// training runtime: includes LibTorch.
#include <sailor/train/executor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

#include <torch/torch.h>

#include <sailor/train/export.hpp>
#include <sailor/comm/hierarchical.hpp>
#include <sailor/config/log.hpp>
#include <sailor/models/gpt.hpp>
#include <sailor/models/synthetic_data.hpp>
#include <sailor/models/token_data.hpp>

#include "checkpoint_io.hpp"
#include "evaluation.hpp"
#include "tied_embeddings.hpp"
#include "fused_adamw.hpp"
#include "local_sgd.hpp"
#include "schedule.hpp"
#include "threads.hpp"


namespace sailor::train {
namespace exec_detail {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

inline comm::buffer_view view_of(const torch::Tensor& t) {
  auto type = t.scalar_type() == torch::kDouble ? comm::element_type::f64 : comm::element_type::f32;
  TORCH_CHECK(t.is_contiguous() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble),
              "communication buffers are contiguous fp32 or fp64 tensors");
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), type};
}

// Tags of point-to-point messages: one per (iteration, micro-batch, direction), so messages
// between the same pair never match the wrong receive.
inline std::uint64_t tag_of(int iteration, int micro_batches, int m, int direction) {
  return ((static_cast<std::uint64_t>(iteration) * micro_batches + m) << 1) |
         static_cast<std::uint64_t>(direction);
}

// A part of this rank's gradient reduced in one data-parallel group.
struct grad_slice {
  std::size_t param = 0;
  int dim = -1;  // -1: the whole tensor
  std::int64_t offset = 0, length = 0;
};

struct dp_group {
  std::unique_ptr<comm::communicator> comm;
  std::vector<grad_slice> slices;
};

// Every gradient of the stage as a view into one flat buffer, parameters in order (so layer
// by layer): zeroing, the norm and clipping are one operation each, and when the stage has
// one data-parallel group that reduces whole tensors (every TP degree equal), a bucket of
// consecutive layers is all-reduced in place, with no gathering copy or scattering back.
struct flat_gradients {
  torch::Tensor buffer;
  std::vector<std::int64_t> offset;                          // per parameter
  std::vector<std::pair<std::int64_t, std::int64_t>> layers;  // [begin, end) per stage layer
  std::vector<const void*> bound;  // data of each gradient when it was bound to the buffer
  bool in_place = false;           // the single DP group reduces ranges of the buffer
  std::int64_t pending_end = -1;   // end of the bucket being filled, -1 when empty
};

// A bucket is all-reduced once it holds this many bytes (or at the stage's first layer).
// 0: one all-reduce per layer, as the simulator models the executor (and the shaping tests
// count); a larger value merges small consecutive layers into fewer collectives.
constexpr std::int64_t bucket_bytes = 0;

// Sum of squares of `t` (fp32): fp32 dot products over chunks (no fp64 copy of the
// gradients), summed in double; one read back to the host.
inline double sum_of_squares(const torch::Tensor& t) {
  auto flat = t.reshape({-1});
  constexpr std::int64_t chunk = 1 << 16;
  std::vector<torch::Tensor> dots;
  for (std::int64_t at = 0, n = flat.numel(); at < n; at += chunk) {
    auto part = flat.narrow(0, at, std::min(chunk, n - at));
    dots.push_back(part.dot(part));
  }
  if (dots.empty()) return 0;
  return torch::stack(dots).to(torch::kDouble).sum().item<double>();
}

// A transfer in flight and the tensor it reads or writes (kept alive until it is done).
struct transfer {
  std::unique_ptr<comm::request> request;
  torch::Tensor buffer;
};

// Reduces the gradients of a stage's layers on a thread of its own, last layer first, each as
// soon as the backward has finished it: the data-parallel all-reduce overlaps the backward of
// the earlier layers. Every rank of a group reduces the same layers in the same order.
class gradient_reducer {
public:
  gradient_reducer(std::function<void(int)> reduce, int first_layer, int end_layer)
      : reduce_(std::move(reduce)), first_(first_layer), next_(end_layer - 1) {
    thread_ = std::thread([this] { loop(); });
  }
  ~gradient_reducer() {
    if (thread_.joinable()) {
      mark_ready(first_);  // unblocks the loop if finish() was never reached
      thread_.join();
    }
  }
  /// Layers [layer, end) have their final gradients.
  void mark_ready(int layer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_from_ = std::min(ready_from_, layer);
    }
    cv_.notify_all();
  }
  /// Waits for the last reduction; rethrows its failure.
  void finish() {
    thread_.join();
    if (failure_) std::rethrow_exception(failure_);
  }

private:
  void loop() {
    try {
      for (; next_ >= first_; --next_) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return ready_from_ <= next_; });
        }
        reduce_(next_);
      }
    } catch (...) {
      failure_ = std::current_exception();
    }
  }

  std::function<void(int)> reduce_;
  int first_, next_;
  int ready_from_ = std::numeric_limits<int>::max();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::exception_ptr failure_;
  std::thread thread_;
};

// The iteration's loss or gradient norm over the plan is not finite (non_finite_totals): its
// step is not taken (run_iteration's error then has field non_finite_field).
struct non_finite_step : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A stage's forward cut at layer boundaries (the last micro-batch's, see gradient_reducer).
struct segment {
  torch::Tensor input, output;
};


}  // namespace exec_detail

using namespace exec_detail;

struct stage_executor::impl {
  config::model_shape model;
  config::plan plan;
  rank_role role;
  train_options options;
  int rank = 0;
  int micro_batches = 0;  // per iteration, whole plan
  int stages = 0;
  int my_tp = 1;
  std::string who;
  torch::Device device = torch::kCPU;

  std::unique_ptr<comm::communicator> world;
  std::unique_ptr<comm::channel> p2p;  // activations and gradients between stages
  // The world all-reduces hierarchically when it spans zones (null when it does not).
  std::unique_ptr<comm::communicator> world_zones;
  comm::communicator& world_reduce() { return world_zones ? *world_zones : *world; }
  std::unique_ptr<comm::communicator> tp_comm;
  std::vector<dp_group> dp_groups;
  flat_gradients flat;
  void bind_flat_gradients();
  bool flat_bound() const;
  double tp_seconds = 0;

  std::unique_ptr<models::stage_module> module;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<models::markov_dataset> data;
  std::shared_ptr<const models::token_dataset> file_data;  // the job's data, if any
  std::uint64_t evaluations = 0;
  std::vector<schedule_op> ops;

  int tp_of(int stage, int replica) const {
    return std::max(1, plan.stages[stage].replicas[replica].tp);
  }
  bool first_stage() const { return role.stage == 0; }
  bool last_stage() const { return role.stage == stages - 1; }

  // Token rows of micro-batch m of `iteration`: [mb, seq + 1]. Sample indices follow the
  // global batch, not the plan: every plan reads the same samples.
  torch::Tensor tokens_of(int iteration, int m,
                          models::data_split split = models::data_split::train) const {
    const int mb = plan.micro_batch;
    auto t = torch::empty({mb, model.sequence + 1}, torch::kLong);
    std::int64_t first = static_cast<std::int64_t>(iteration) * plan.global_batch +
                         static_cast<std::int64_t>(m) * mb;
    if (file_data)
      file_data->fill(split, options.seed, first, mb, t.data_ptr<std::int64_t>());
    else
      data->fill(first, mb, t.data_ptr<std::int64_t>());
    return t.to(device);
  }
  void set_learning_rate(int iteration);

  status connect(comm::communicator_factory& factory, comm::channel_factory* p2p_factory);
  status open_channel(comm::channel_factory* p2p_factory, const std::vector<int>& peers);
  void plan_dp_slices(const group_spec& spec, dp_group& group) const;
  // One training step: the pipeline schedule (pipeline.hpp), gradient synchronisation
  // (gradient_sync.cpp), the optimizer step and checkpoint (optimizer_step.cpp).
  iteration_telemetry run(int iteration);
  // Data-parallel all-reduce of one layer's gradients (on the gradient_reducer's thread).
  void reduce_layer(int layer);
  // Waits for the rest of the data-parallel all-reduce, sums tied gradients; its seconds.
  double finish_gradient_sync(std::unique_ptr<gradient_reducer> reducer);
  // This rank's share of the squared gradient norm (each piece of a parameter counted once).
  double local_grad_norm_sq() const;
  // Loss and norm all-reduce, clipping, learning rate, step; the all-reduce's seconds.
  double step_optimizer(int iteration, double loss_sum, iteration_telemetry& tel);
  std::vector<int> param_layer;  // layer of each parameter

  // Checkpoints (ranks of replica 0 with a checkpoint_dir): see checkpoint_io.hpp.
  std::unique_ptr<detail::checkpoint_writer> checkpoints;
  double take_checkpoint(int iteration);

  // DiLoCo (plan.local_sgd): the region's group of all its ranks (the loss, norm and tied
  // embeddings reduce there instead of over the world), the exchange groups, and the outer
  // loop, declared last so that it goes before the groups it uses.
  region_layout regions;
  std::unique_ptr<comm::communicator> region_comm;
  std::unique_ptr<comm::communicator> outer_exchange, outer_sync;
  int step_micro_batches = 0;  // the micro-batches the loss is the mean of: the region's, or all
  bool counts_norm = false;    // this rank's replica is the one whose gradients the norm counts
  comm::communicator& step_reduce() { return region_comm ? *region_comm : world_reduce(); }
  void start_local_sgd();
  // After a restore that succeeded: DiLoCo continues from the outer state restored, or starts
  // a fresh outer step from the restored parameters when there was none (passes `restored` on).
  status continue_outer(status restored, const detail::outer_tensors& state);
  std::unique_ptr<detail::local_sgd> outer;
};

// The channel's peers: the ranks of adjacent stages, and the ring neighbours across zones in

}  // namespace sailor::train
