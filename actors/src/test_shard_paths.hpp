#pragma once
// For the actors' unit tests: the path of a checkpoint shard file as a writer names it
// (train/checkpoint_files.hpp), without writing it. No LibTorch.

#include <cstdio>
#include <string>

#include "sailor/train/checkpoint_files.hpp"

namespace sailor::testing {

/// Writer `writer` of `writers`'s file in the checkpoint after `iterations` under `folder`;
/// each writer holds `layers` layers, writer w from layer w * layers.
inline std::string shard_path(const std::string& folder, int iterations, int writer, int writers, int layers = 1,
                              const std::string& group = "00000000000000ab") {
  train::detail::shard_file f;
  f.group = group;
  f.writer = writer;
  f.writers = writers;
  f.first_layer = writer * layers;
  f.end_layer = (writer + 1) * layers;
  char iter[32];
  std::snprintf(iter, sizeof iter, "iter-%08d", iterations);
  return folder + "/" + iter + "/" + train::detail::shard_file_name(f);
}

}  // namespace sailor::testing
