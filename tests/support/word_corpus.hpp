#pragma once
// Text for the tests that train on a user's data file.

#include <cstdint>
#include <string>

namespace sailor::testing {

/// At least `bytes` bytes of text over a few words, in a deterministic order with some
/// structure to learn (every third word follows from the length so far).
inline std::string word_corpus(std::size_t bytes) {
  const char* words[] = {"the ", "king ", "and ", "queen ", "of ", "night ", "speak ", "well, ", "now.\n"};
  std::string out;
  std::uint64_t x = 88172645463325252ull;
  while (out.size() < bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out += words[(x % 3 == 0) ? (out.size() / 5) % 9 : x % 9];
  }
  return out;
}

}  // namespace sailor::testing
