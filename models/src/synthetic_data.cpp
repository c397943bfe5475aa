#include <sailor/models/synthetic_data.hpp>

namespace sailor::models {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform01(std::uint64_t& state) { return (splitmix(state) >> 11) * 0x1.0p-53; }

}  // namespace

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = a * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  splitmix(s);
  s ^= b;
  return splitmix(s);
}

markov_dataset::markov_dataset(int vocabulary, int sequence, std::uint64_t seed,
                               std::int64_t num_samples)
    : vocabulary_(vocabulary), sequence_(sequence), seed_(seed), num_samples_(num_samples) {
  std::uint64_t state = mix_seed(seed, 0xDA7A);
  next_.resize(static_cast<std::size_t>(vocabulary) * successors);
  for (auto& n : next_) n = static_cast<std::int32_t>(splitmix(state) % vocabulary);
}

void markov_dataset::fill(std::int64_t first, int count, std::int64_t* tokens) const {
  for (int i = 0; i < count; ++i) {
    std::int64_t index = first + i;
    if (num_samples_ > 0) index %= num_samples_;
    std::uint64_t state = mix_seed(seed_ ^ 0x5A5A5A5Aull, static_cast<std::uint64_t>(index));
    std::int64_t* row = tokens + static_cast<std::int64_t>(i) * (sequence_ + 1);
    std::int64_t token = static_cast<std::int64_t>(splitmix(state) % vocabulary_);
    row[0] = token;
    for (int t = 1; t <= sequence_; ++t) {
      if (uniform01(state) < follow_probability)
        token = next_[static_cast<std::size_t>(token) * successors + splitmix(state) % successors];
      else
        token = static_cast<std::int64_t>(splitmix(state) % vocabulary_);
      row[t] = token;
    }
  }
}

std::vector<std::int64_t> markov_dataset::sample(std::int64_t index) const {
  std::vector<std::int64_t> out(sequence_ + 1);
  fill(index, 1, out.data());
  return out;
}

}  // namespace sailor::models
