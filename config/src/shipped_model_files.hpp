#pragma once
// The text of configs/models/*.yaml, compiled in at build time (config/CMakeLists.txt).

#include <string_view>
#include <vector>

namespace sailor::config::detail {

struct embedded_file {
  std::string_view path;  ///< as in the source tree, e.g. configs/models/opt-350m.yaml
  std::string_view text;
};

std::vector<embedded_file> shipped_model_files();

}  // namespace sailor::config::detail
