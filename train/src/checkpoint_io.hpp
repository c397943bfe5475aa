#pragma once
// Private to the training executor (includes LibTorch): writing a rank's checkpoint shard in
// the background and restoring any rank's slices from the shards of any plan.
//
// A shard file is
//
//   "SAILORCKPT1\n"  (12 bytes)
//   u64              length of the header (little endian)
//   header           JSON: format, iterations, model shape, optimizer, layer range, TP rank
//                    and size, data_bytes, and one entry per tensor: parameter name,
//                    state ("param", "exp_avg", "exp_avg_sq", "momentum_buffer"), shard_dim,
//                    full_size, shape, dtype, offset and bytes in the data section and the
//                    CRC-32 of those bytes ("crc32", checked on restore: verify_shard);
//                    "steps": AdamW's step count per parameter
//   data             the tensors' bytes, row-major, back to back
//
// so that a reader seeks to just the tensors (and, for tensors split along dimension 0, just
// the rows) it needs.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <torch/torch.h>

#include <sailor/train/executor.hpp>
#include <sailor/config/error.hpp>
#include <sailor/config/model.hpp>
#include <sailor/config/plan.hpp>
#include <sailor/models/gpt.hpp>

#include "sailor/train/checkpoint_files.hpp"
#include "local_sgd.hpp"

namespace sailor::train::detail {

/// Writes the checkpoints of one rank of replica 0: one write in flight at a time.
class checkpoint_writer {
public:
  /// `plan` and `role` give this writer's file name (its group, index and layer range).
  checkpoint_writer(std::string dir, const config::model_shape& model, const config::plan& plan,
                    const rank_role& role, const train_options& options, std::string who);
  /// Waits for the write in flight.
  ~checkpoint_writer();
  checkpoint_writer(const checkpoint_writer&) = delete;
  checkpoint_writer& operator=(const checkpoint_writer&) = delete;

  /// Waits for the previous write, copies the parameters and optimizer state on the calling
  /// thread (into buffers kept from the previous checkpoint), then writes checkpoint `iterations` on a background thread. Returns the seconds
  /// spent on the calling thread. A failed write is logged and kept for flush().
  /// Under DiLoCo, `outer` is the outer state, written beside (states "outer_anchor" and
  /// "outer_momentum").
  double take(int iterations, const models::stage_module& module,
              torch::optim::Optimizer& optimizer, const outer_tensors* outer = nullptr);
  /// Waits for the write in flight; the first failure of any write so far.
  status flush();
  /// The newest failure (of a write that is over) not taken yet; empty: none. Does not wait
  /// for a write in flight.
  std::string take_failure();

  /// Seconds the last completed background write took (0 before any).
  double last_write_seconds() const { return last_write_s_; }
  /// The path of the newest shard file written in full (empty before any). Any thread.
  std::string last_written() const {
    std::lock_guard lock{written_mutex_};
    return last_written_;
  }

private:
  void wait_previous();
  void wait_previous_if_done();
  void note_failure(const error& e);

  std::string dir_;
  config::model_shape model_;
  optimizer_kind optimizer_;
  shard_file file_;
  std::string who_;
  std::thread thread_;
  status write_result_;  // of the write thread_ runs; read after join
  double write_s_ = 0;   // likewise
  status first_failure_;
  double last_write_s_ = 0;
  // Host copies of the state, reused from one checkpoint to the next (in the order take()
  // visits the tensors): one extra copy of this rank's parameters and optimizer state.
  std::vector<torch::Tensor> buffers_;
  // A folder the writer must not prune (train_options::keep_checkpoint); may be empty.
  std::function<bool(const std::string&)> keep_;
  mutable std::mutex written_mutex_;
  std::string last_written_;
  std::string unreported_failure_;  // guarded by written_mutex_
  bool write_done_ = true;          // the write thread_ runs is over; guarded likewise
};

/// This rank's state after `iterations` completed iterations as the bytes of the shard file
/// replica 0 of its stage writes (same name and format: any plan restores from it). An
/// error when this replica's TP degree differs from replica 0's (no such file name).
result<state_shard> encode_shard(int iterations, const config::model_shape& model,
                                 const config::plan& plan, const rank_role& role,
                                 optimizer_kind kind, const models::stage_module& module,
                                 torch::optim::Optimizer& optimizer, const outer_tensors* outer = nullptr);

/// Loads the slices of checkpoint `iterations` under `dir` that `module` holds into it, and
/// the matching optimizer state into `optimizer` (whose parameters are module's tensors).
/// With `outer`, DiLoCo's outer state too when the checkpoint holds it for every parameter
/// (else `outer` is left empty).
status restore_checkpoint(const std::string& dir, int iterations,
                          const config::model_shape& model, const train_options& options,
                          models::stage_module& module, torch::optim::Optimizer& optimizer,
                          const std::string& who, outer_tensors* outer = nullptr);

/// The same from `shards` (memory or files, executor.hpp), of one complete writing layout.
status restore_shards(const std::vector<shard_input>& shards, int iterations,
                      const config::model_shape& model, const train_options& options,
                      models::stage_module& module, torch::optim::Optimizer& optimizer,
                      const std::string& who, outer_tensors* outer = nullptr);

}  // namespace sailor::train::detail
