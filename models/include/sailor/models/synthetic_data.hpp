#pragma once
/// A built-in data set that needs no download: token sequences from a fixed random Markov
/// chain (each token has a few likely successors), deterministic from the seed.
///
/// Sample i of the data set is a function of (seed, i) only, so any plan that reads the same
/// sample indices trains on the same tokens. An epoch is `num_samples` samples (0: no
/// epochs, every index is a fresh sample); index i reads sample i mod num_samples.

#include <cstdint>
#include <vector>

namespace sailor::models {

class markov_dataset {
public:
  markov_dataset(int vocabulary, int sequence, std::uint64_t seed, std::int64_t num_samples = 0);

  /// Writes `count` samples starting at index `first`, each sequence + 1 tokens (inputs are
  /// the first `sequence`, targets the last `sequence`), row after row into `tokens`.
  void fill(std::int64_t first, int count, std::int64_t* tokens) const;
  std::vector<std::int64_t> sample(std::int64_t index) const;

  int vocabulary() const { return vocabulary_; }
  int sequence() const { return sequence_; }
  std::int64_t num_samples() const { return num_samples_; }

  /// How likely the chain follows one of a token's successors (else: a uniform token).
  static constexpr double follow_probability = 0.9;
  static constexpr int successors = 2;

private:
  int vocabulary_;
  int sequence_;
  std::uint64_t seed_;
  std::int64_t num_samples_;
  std::vector<std::int32_t> next_;  ///< vocabulary x successors
};

/// A 64-bit mix of several values (splitmix64 steps); used to derive generator seeds from
/// (seed, layer, parameter name hash, ...).
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b);

}  // namespace sailor::models
