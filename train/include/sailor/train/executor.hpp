#pragma once
/// The per-rank training executor: runs one rank's share of any plan.
///
/// A plan's ranks are numbered globally: stages in order, then replicas of the stage in
/// order, then tensor-parallel ranks of the replica (see global_rank_of). Each rank builds
/// the module of its stage (its layer range, its TP shard), and per iteration:
///
///   1. runs its micro-batches with a 1F1B schedule (at most num_stages - stage forwards in
///      flight), receiving activations from the previous stage and gradients from the next
///      one asynchronously (receives are posted at the start of the iteration, sends are
///      non-blocking), so transfers overlap compute;
///   2. all-reduces gradients across the data-parallel replicas of its stage, shard by shard
///      (replicas may differ in TP degree: each slice among the ranks that hold it);
///   3. clips by the global norm over all stages and shards and steps the optimizer.
///
/// A stage with `recompute` keeps only its inputs in the forward and runs the forward again,
/// with autograd, just before its backward (activation recomputation).
///
/// Micro-batch m (0 <= m < global_batch / micro_batch) is processed by replica m % R_s of
/// stage s, where R_s is that stage's replica count, so stages may have different replica
/// counts. Loss gradients are scaled so that the result is the mean over the global batch.
/// Every plan thus trains on the same samples and, up to floating-point rounding, produces
/// the same weights and losses for the same seed.
///
/// No LibTorch in this header (pimpl): actors include it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sailor/comm/channel.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/config/cluster.hpp>
#include <sailor/config/error.hpp>
#include <sailor/config/job.hpp>
#include <sailor/config/model.hpp>
#include <optional>
#include <span>
#include <sailor/config/plan.hpp>

namespace sailor::train {

/// Where a rank sits in a plan.
struct rank_role {
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;

  bool operator==(const rank_role&) const = default;
};

/// Total ranks of a plan (sum of TP degrees over all replicas of all stages).
int world_size(const config::plan& p);
/// The global rank of `role`; -1 when the role is not in the plan.
int global_rank_of(const config::plan& p, const rank_role& role);
/// The role of global rank `rank` (precondition: 0 <= rank < world_size(p)).
rank_role role_of(const config::plan& p, int rank);

enum class optimizer_kind { adamw, sgd };

struct train_options {
  std::uint64_t seed = 1;  ///< weights and data
  optimizer_kind optimizer = optimizer_kind::adamw;
  double learning_rate = 1e-3;  ///< peak of the schedule (learning_rate_at)
  /// Schedule: linear warm-up over `warmup_iterations`, then cosine decay to
  /// `min_learning_rate` at `decay_iterations` (< 0: no decay, the rate stays at its peak).
  double min_learning_rate = -1;
  int warmup_iterations = 0;
  int decay_iterations = 0;
  double weight_decay = 0.0;  ///< on matrices only (models::decays)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  ///< AdamW
  double momentum = 0.0;                          ///< SGD
  double clip_norm = 1.0;  ///< global gradient norm bound; <= 0 disables clipping
  /// Torch intra-op threads for this process; 0 leaves the setting alone (it is per process,
  /// so tests running ranks as threads set it once).
  int torch_threads = 0;
  /// OpenBLAS's threads (its matrix products) when torch_threads is set; 0: as many as
  /// torch_threads. One process alone on a machine trains a small model fastest with one
  /// intra-op thread (small element-wise operators gain nothing from a second) and every
  /// core for the products, PyTorch's own default on OpenBLAS.
  int blas_threads = 0;
  /// -1: train on the CPU (use a Gloo factory). >= 0: parameters, activations and buffers on
  /// this CUDA device (use an NCCL factory: Gloo cannot read device memory). Needs a
  /// CUDA-enabled LibTorch; untested on this project's CPU machines.
  int cuda_device = -1;
  /// Bound on every wait for a peer.
  std::chrono::milliseconds timeout{60000};
  /// Synthetic data set: number of distinct samples (an epoch), 0 = unbounded.
  std::int64_t dataset_samples = 0;
  /// The user's data (models/token_data.hpp); without it, the synthetic Markov stream.
  std::optional<config::data_source> data;
  /// Batches of global_batch sequences each validation_loss() averages.
  int eval_batches = 1;
  /// Emulated links between the plan's zones (the cluster's). The executor itself shapes
  /// nothing: the transport of its channel does (data_plane.hpp), so activations, gradients
  /// and the cross-zone phase of hierarchical all-reduces take the links' latency and
  /// bandwidth for their real bytes. Empty: no shaping.
  std::vector<config::zone_link> links;
  /// Plan-independent checkpoints (checkpoint.hpp): after every `checkpoint_every`-th
  /// completed iteration, ranks of replica 0 write their shard of parameters and optimizer
  /// state under this folder, asynchronously. Empty: no checkpoints.
  std::string checkpoint_dir;
  int checkpoint_every = 1;
  /// Also a checkpoint after this many completed iterations (the job's last, so that export
  /// and generate find the trained model); 0: none besides every checkpoint_every-th.
  int checkpoint_final = 0;
  /// Says whether a checkpoint folder (checkpoint_path of it, lexically normal) must be kept
  /// when the writer prunes its older shards: one a plan about to start restores, and the
  /// newest checkpoint that outlives a whole stage with every newer one (the node trainer's
  /// pins, from the supervisor's checkpoint_kept). Empty: none.
  std::function<bool(const std::string& folder)> keep_checkpoint;
  /// DiLoCo's outer optimizer, exchange encoding, fragments and overlap (local_sgd.hpp); used
  /// when the plan has local_sgd, whose inner_steps and regions it follows.
  config::data_parallel_options outer;
};

/// Sets the options' learning-rate schedule, betas, weight decay and clipping to a job's (the
/// job file's, or the training job that carries it to a node).
void set_schedule(train_options& options, const config::optimizer_schedule& schedule);

/// The executor options a job file asks for: seed, optimizer and its schedule, betas, weight
/// decay, clipping, data and validation batches (the rest keeps its defaults).
train_options options_from(const config::job& job);

/// The learning rate of `iteration` (0-based) under the options' schedule, as nanoGPT computes
/// it: lr * (it + 1) / (warmup + 1) during warm-up, then a cosine from lr at the end of warm-up
/// to min_learning_rate at decay_iterations, min_learning_rate after.
double learning_rate_at(const train_options& options, int iteration);

/// What one rank measured in one iteration (seconds).
struct iteration_telemetry {
  int iteration = 0;
  double loss = 0;          ///< mean loss over the global batch (the same on every rank)
  double grad_norm = 0;     ///< global gradient norm before clipping
  double compute_s = 0;     ///< forward and backward compute
  double send_wait_s = 0;   ///< waiting for sends to complete
  double recv_wait_s = 0;   ///< waiting for activations or gradients to arrive
  /// TP all-reduces inside the replica, what the data-parallel gradient all-reduce adds after
  /// the backward (it overlaps the last backward), and the loss and norm all-reduce.
  double all_reduce_s = 0;
  double optimizer_s = 0;   ///< norm, clipping and optimizer step
  /// Assembling the micro-batches' tokens on the training thread (the stage's first or last
  /// rank; waiting for the prefetching thread when it is behind).
  double data_s = 0;
  /// Time the training thread spent taking a checkpoint after the step (copying the state,
  /// and waiting for the previous checkpoint's write if it was still in flight); 0 when none.
  double checkpoint_s = 0;
  double total_s = 0;
  int micro_batches = 0;        ///< processed by this rank
  std::int64_t tokens = 0;      ///< tokens of the global batch
};

/// A rank's state (parameters and optimizer) after `iterations` completed iterations, as the
/// bytes of a checkpoint shard file named `name` (checkpoint_io.hpp): what a surviving rank
/// keeps in memory and serves when its plan ends (recovery from the survivors' memory).
struct state_shard {
  int iterations = 0;
  std::string name;
  std::vector<std::byte> bytes;
};

/// One checkpoint shard a restore reads: its path (the file name says the writing layout, the
/// layers and the TP slice), and its bytes: in memory as `parts` back to back (what a fetch
/// received from a holder's memory, never written to a file; the caller keeps them alive), or,
/// when `file` is set, the local file there.
struct shard_input {
  std::string path;
  std::string file;
  std::vector<std::span<const std::byte>> parts;
};

/// The field of run_iteration's error when the iteration's loss or gradient norm was not
/// finite (NaN or infinite).
inline constexpr const char* non_finite_field = "non-finite";

/// Whether `e` is run_iteration's error for a non-finite loss or gradient norm.
inline bool non_finite_iteration(const error& e) { return e.field == non_finite_field; }

/// What is not finite of an iteration's loss and gradient norm over the plan ("the loss is
/// nan", "the gradient norm is inf"); nullopt when both are finite.
std::optional<std::string> non_finite_totals(double loss, double grad_norm);

/// One rank of a plan. Resource type: not copyable, one owner, one thread drives it (abort()
/// excepted).
class stage_executor {
public:
  /// Builds the stage module, the communicators and the point-to-point channel of `role`:
  /// blocks until every rank of the plan has called create (bounded by options.timeout).
  /// Collectives come from `factory`; activations and gradients travel over a channel from
  /// `p2p` (comm/channel.hpp: comm's transport), or, when it is null, over the world
  /// communicator's own pairs. Errors for an invalid plan (layers not covered, TP degree not
  /// dividing heads, vocabulary or ffn) or a failed rendezvous.
  static result<std::unique_ptr<stage_executor>> create(const config::model_shape& model,
                                                        const config::plan& plan,
                                                        const rank_role& role,
                                                        comm::communicator_factory& factory,
                                                        const train_options& options,
                                                        comm::channel_factory* p2p = nullptr);
  ~stage_executor();
  stage_executor(const stage_executor&) = delete;
  stage_executor& operator=(const stage_executor&) = delete;

  /// Runs iteration `iteration` (its number selects the samples of the global batch). All
  /// ranks of the plan must call it with the same number. An iteration whose loss or gradient
  /// norm over the plan is not finite fails on every rank before the optimizer step (the
  /// state stays that after `iteration` iterations, which led to it), with an error whose
  /// field is `non_finite_field` (non_finite_iteration).
  result<iteration_telemetry> run_iteration(int iteration);

  /// The mean loss over options.eval_batches held-out batches (forward only, no change to
  /// the weights); the same on every rank. All ranks of the plan call it together, between
  /// iterations. An error when the job has no data with a validation part.
  result<double> validation_loss();

  /// Gives up the iteration in flight, if any, and every later one: each communicator and the
  /// channel of this rank is aborted (comm::communicator::abort), so that run_iteration and
  /// validation_loss return an error within a short bound, whatever the peers do. The state
  /// stays that after the last completed iteration (the optimizer steps only after an
  /// iteration's last collective): state_snapshot, save_state and the checkpoints still
  /// work. Any thread may call it, while another trains; it cannot be undone.
  void abort(const std::string& why);

  /// Loads the checkpoint taken after `iterations` completed iterations from `dir` (written by
  /// any plan of the same model and optimizer): this rank's slices of parameters and
  /// optimizer state. The next iteration to run is then `iterations`. A value that is not
  /// finite (NaN, infinite) in any of them refuses the restore, naming the shard file.
  status restore(const std::string& dir, int iterations);
  /// The same from `shards` (any mix of memory and files, of one writing layout, after
  /// `iterations` iterations): every shard is checked whole first, as from a folder.
  status restore(const std::vector<shard_input>& shards, int iterations);
  /// Loads this rank's slice of every parameter from a Hugging Face checkpoint at `path`
  /// (pretrained.hpp: a .safetensors file or a folder), before the first iteration; the
  /// optimizer state stays fresh. Nothing changes when it fails (the error names the file and
  /// the tensor).
  status load_pretrained(const std::string& path);
  /// Waits for this rank's checkpoint writes in flight; returns the first failure.
  status flush_checkpoints();
  /// The path of the newest checkpoint shard this rank has written in full (empty: none).
  std::string last_checkpoint_file() const;
  /// Why this rank's newest checkpoint write failed, once (empty: no failure since the last
  /// call). Training goes on; the caller tells the supervisor.
  std::string take_checkpoint_failure();

  /// This rank's state after `iterations` completed iterations (the caller's count: the
  /// state between iterations) as the checkpoint shard replica 0 of its stage would write.
  result<state_shard> state_snapshot(int iterations) const;

  /// Parameters and optimizer state of this rank's shard, as bytes (for recovery).
  result<std::vector<char>> save_state() const;
  /// Restores what save_state wrote on a rank of the same role shape (stage layers, TP).
  status load_state(const std::vector<char>& bytes);

  /// DiLoCo (plan.local_sgd): after `completed` iterations, applies the exchanges in flight
  /// and exchanges every fragment once more without overlap, so that every region holds the
  /// same weights (for a validation or export). Every rank of the plan calls it at the same
  /// point; the run_iteration of the options' checkpoint_final does so itself. A no-op on a
  /// synchronous plan.
  status finish_outer_steps(int completed);

  /// Number of parameters held by this rank.
  std::int64_t num_parameters() const;
  const rank_role& role() const;
  /// A hash of this rank's parameter values (FNV-1a over their bytes): equal on two ranks
  /// exactly when they hold the same weights (data-parallel replicas; DiLoCo's regions right
  /// after an exchange without overlap).
  std::uint64_t parameters_hash() const;
  /// Bytes this rank's point-to-point channel has sent: activations, gradients and the
  /// cross-zone phases of hierarchical all-reduces (the bytes that cross zone links).
  std::uint64_t channel_bytes_sent() const;
  /// DiLoCo: the bytes of pseudo-gradient this rank has put into exchanges (its own payloads,
  /// as encoded); 0 without local_sgd or on a replica that does not lead its region.
  std::int64_t outer_payload_bytes() const;

private:
  struct impl;
  friend class pipeline_pass;  // one iteration's 1F1B schedule (private, LibTorch)
  explicit stage_executor(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

/// Validates that `plan` can be executed for `model`: stages cover layers 0..L+1 in order,
/// each TP degree divides heads, vocabulary and ffn, micro-batches divide evenly.
status validate_for_training(const config::model_shape& model, const config::plan& plan);
/// Refuses a model whose architecture or options models/ does not implement (a Llama without
/// rotary positions, a gated MLP on GPT-2, ...), naming the field.
status validate_architecture(const config::model_shape& model);

}  // namespace sailor::train
