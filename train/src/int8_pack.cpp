#include "int8_pack.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sailor::train::detail {

std::int64_t int8_bytes(std::int64_t values) {
  const std::int64_t blocks = (values + int8_block - 1) / int8_block;
  return blocks * static_cast<std::int64_t>(sizeof(float)) + values;
}

void encode_int8(std::span<const float> values, std::uint8_t* out) {
  const std::size_t n = values.size(), block = static_cast<std::size_t>(int8_block);
  const std::size_t blocks = (n + block - 1) / block;
  auto* q = reinterpret_cast<std::int8_t*>(out + blocks * sizeof(float));
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * block, end = std::min(n, begin + block);
    float largest = 0;
    for (std::size_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
    const float scale = largest / 127.0f;
    std::memcpy(out + b * sizeof(float), &scale, sizeof(float));
    const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    for (std::size_t i = begin; i < end; ++i)
      q[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(values[i] * inverse), -127.0f, 127.0f));
  }
}

void add_decoded_int8(const std::uint8_t* in, std::span<float> into) {
  const std::size_t n = into.size(), block = static_cast<std::size_t>(int8_block);
  const std::size_t blocks = (n + block - 1) / block;
  const auto* q = reinterpret_cast<const std::int8_t*>(in + blocks * sizeof(float));
  for (std::size_t b = 0; b < blocks; ++b) {
    float scale = 0;
    std::memcpy(&scale, in + b * sizeof(float), sizeof(float));
    for (std::size_t i = b * block, end = std::min(n, i + block); i < end; ++i) into[i] += scale * q[i];
  }
}

std::vector<std::pair<std::size_t, std::size_t>> fragments_by_layer(const std::vector<std::int64_t>& numel,
                                                                    const std::vector<int>& layer_of, int count) {
  // Whole layers: the parameter ranges where the layer changes.
  std::vector<std::pair<std::size_t, std::size_t>> layers;
  for (std::size_t i = 0; i < numel.size(); ++i)
    if (i == 0 || layer_of[i] != layer_of[i - 1]) layers.push_back({i, i + 1});
    else layers.back().second = i + 1;
  std::int64_t total = 0;
  for (auto n : numel) total += n;
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::int64_t so_far = 0;
  const int wanted = std::max(1, std::min<int>(count, static_cast<int>(layers.size())));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (out.empty() || (static_cast<int>(out.size()) < wanted &&
                        so_far * wanted >= total * static_cast<std::int64_t>(out.size()) &&
                        layers.size() - l >= static_cast<std::size_t>(wanted) - out.size()))
      out.push_back({layers[l].first, layers[l].second});
    else
      out.back().second = layers[l].second;
    for (std::size_t i = layers[l].first; i < layers[l].second; ++i) so_far += numel[i];
  }
  return out;
}

}  // namespace sailor::train::detail
