#include "sailor/config/shipped_models.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "sailor/config/load.hpp"
#include "shipped_model_files.hpp"

namespace sailor::config {

std::string normalized_name(const std::string& name) {
  std::string out;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<shipped_model> shipped_models() {
  std::vector<shipped_model> out;
  for (const auto& f : detail::shipped_model_files()) {
    const std::string file(f.path);
    auto shape = load_model_text(std::string(f.text), file);
    if (!shape) {
      std::fprintf(stderr, "sailor: the shipped model %s does not load: %s\n", file.c_str(),
                   shape.error().to_string().c_str());
      std::abort();
    }
    out.push_back({file, std::move(*shape)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  return out;
}

std::optional<model_shape> find_shipped_model(const std::string& name) {
  const std::string want = normalized_name(name);
  for (auto& m : shipped_models()) {
    const std::string stem = std::filesystem::path(m.file).stem().string();
    if (normalized_name(m.shape.name) == want || normalized_name(stem) == want ||
        (!m.shape.sailor_name.empty() && normalized_name(m.shape.sailor_name) == want))
      return std::move(m.shape);
  }
  return std::nullopt;
}

std::optional<model_shape> find_shipped_sailor_model(const std::string& sailor_name) {
  const std::string want = normalized_name(sailor_name);
  for (auto& m : shipped_models())
    if (!m.shape.sailor_name.empty() && normalized_name(m.shape.sailor_name) == want)
      return std::move(m.shape);
  return std::nullopt;
}

}  // namespace sailor::config
