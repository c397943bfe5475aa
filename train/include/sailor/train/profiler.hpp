#pragma once
/// Measures the per-layer forward, backward and optimizer-step times of a model on this
/// machine (what `sailor profile` writes and `sailor demo` predicts from).
///
/// Each layer kind is timed once, in isolation, as the training executor runs it: the
/// embedding (layer 0), one block (layer 1; every block has the same shape, so its times are
/// repeated for layers 1..L) and the head with the loss (layer L+1). TP degrees above 1 run
/// that many ranks as threads of this process, meeting through an in-memory Gloo store, so the
/// times include the TP all-reduces (as Sailor's profiles do). Each time is the median (or
/// the mean) of `repeats` runs after `warmup` runs.
///
/// No LibTorch in this header.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>
#include <sailor/config/model.hpp>
#include <sailor/config/profile.hpp>

namespace sailor::train {

struct profile_options {
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<int> tp_degrees = {1};
  int warmup = 2;
  int repeats = 7;
  /// Keep the median of the repeats (robust: the time of the layer itself), or their mean
  /// (the expected time under this machine's current load, preemptions included: what a
  /// prediction of a training run on a shared machine needs).
  bool mean = false;
  /// Time each pass by the CPU time of the thread that runs it (its work: what it needs of a
  /// core, not the waits for one that other processes on the host cause) instead of the
  /// wall clock. For CPU ranks that share a host's cores (the simulator's host_cores).
  bool cpu_clock = false;
  /// Bytes swept through memory (untimed) before each timed pass, so that it starts with
  /// caches another process just used, as a rank's pass does on an oversubscribed host (it
  /// got the core back after waiting for a transfer). 0: passes back to back, caches warm.
  std::size_t cold_cache_bytes = 0;
  /// Torch intra-op threads of this process while profiling (the demo's nodes use 1).
  int torch_threads = 1;
  /// OpenBLAS threads (its matrix products); 0: as many as torch_threads. The nodes give a
  /// rank's matrix products its share of the cores (sailor-node --threads).
  int blas_threads = 0;
  /// -1: CPU. >= 0: this CUDA device (needs a CUDA-enabled LibTorch and NCCL for TP > 1).
  int cuda_device = -1;
  /// The GPU type the times are filed under (the catalog name of the device).
  std::string gpu_type = "CPU";
  std::uint64_t seed = 1;
  std::chrono::milliseconds timeout{30000};
};

/// Profiles `model`: by_gpu[gpu_type].times[mbs][tp] holds num_all_layers() entries, each
/// with positive forward, backward and update times (update: the executor's step of that
/// layer's parameters: their share of the global gradient norm, the clipping, the optimizer). Errors for a TP degree that does not
/// divide heads, vocabulary and ffn, an empty list, or a failed rendezvous.
result<config::model_profile> profile_model(const config::model_shape& model,
                                            const profile_options& options);

/// What the host gives CPU ranks, measured alongside a profile (`--host-figures FILE`).
struct host_figures {
  /// Of one core, what this process got while profiling: its CPU time over the wall time
  /// (1 alone on an idle host; about cores / processes when more processes than cores ran).
  double core_share = 0;
  /// CPU seconds (every thread of the process: Gloo's, the waiters', the copies) that one
  /// rank's point-to-point message of one micro-batch's activation costs on loopback, and
  /// one gradient all-reduce of a block's parameters (gathered into one buffer, reduced
  /// between two ranks, copied back, as the executor does).
  double cpu_per_message_s = 0;
  double cpu_per_collective_s = 0;
};

/// Measures the communication figures of host_figures for `model` at micro-batch `mbs`
/// (two ranks as threads of this process, Gloo on loopback); core_share is left 0.
result<host_figures> measure_host_communication(const config::model_shape& model, int mbs,
                                                const profile_options& options);

/// CPU seconds of this process (user and system, every thread) so far.
double process_cpu_s();

/// Reads and writes host figures as a small JSON object. Errors name the file.
result<host_figures> load_host_figures(const std::string& path);
status save_host_figures(const host_figures& figures, const std::string& path);

}  // namespace sailor::train
