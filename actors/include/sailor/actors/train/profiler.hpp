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
  /// Torch intra-op threads of this process while profiling (the demo's nodes use 1).
  int torch_threads = 1;
  /// -1: CPU. >= 0: this CUDA device (needs a CUDA-enabled LibTorch and NCCL for TP > 1).
  int cuda_device = -1;
  /// The GPU type the times are filed under (the catalog name of the device).
  std::string gpu_type = "CPU";
  std::uint64_t seed = 1;
  std::chrono::milliseconds timeout{30000};
};

/// Profiles `model`: by_gpu[gpu_type].times[mbs][tp] holds num_all_layers() entries, each
/// with positive forward, backward and update times. Errors for a TP degree that does not
/// divide heads, vocabulary and ffn, an empty list, or a failed rendezvous.
result<config::model_profile> profile_model(const config::model_shape& model,
                                            const profile_options& options);

/// `sailor-node profile ...` (what `sailor profile` runs): parses `args` (argv without the
/// program name and the word `profile`), profiles and writes the JSON file. Exit code.
int profile_command(const std::vector<std::string>& args);

}  // namespace sailor::train
