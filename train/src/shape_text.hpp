#pragma once
// A tensor shape as errors name it: "[768, 2304]". Private to train/.
#include <cstdint>
#include <string>
#include <vector>

namespace sailor::train::detail {

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace sailor::train::detail
