#pragma once
/// Small helpers for text that people read.

#include <algorithm>
#include <string>
#include <vector>

namespace sailor {

/// "1 stage", "2 stages", "0 replicas": a count and its noun, plural unless the count is 1.
/// `noun` is the singular; nouns here take an "s" (stage, replica, region, zone, node, role).
inline std::string count_of(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// Edits (insert, delete, replace) that turn `a` into `b`: for "did you mean" suggestions.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// The candidate nearest to `word` when it is a near miss (at most 2 edits), else "".
template <class Names>
std::string closest_name(const std::string& word, const Names& candidates) {
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& c : candidates) {
    const std::string name(c);
    if (auto d = edit_distance(word, name); d < best_distance) best_distance = d, best = name;
  }
  return best;
}

}  // namespace sailor
