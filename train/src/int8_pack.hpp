#pragma once
// DiLoCo's int8 encoding of a pseudo-gradient and its fragments by layer (local_sgd.hpp): plain
// functions over floats, no LibTorch (tested on their own).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace sailor::train::detail {

/// Values per fp32 scale: each block of this many values is scaled by its largest magnitude
/// over 127 and rounded to the nearest int8 (symmetric).
inline constexpr std::int64_t int8_block = 256;

/// Bytes of `values` packed: one fp32 scale per block, then one byte per value.
std::int64_t int8_bytes(std::int64_t values);
/// Packs `values` into int8_bytes(values.size()) bytes at `out`.
void encode_int8(std::span<const float> values, std::uint8_t* out);
/// Adds the values packed at `in` (int8_bytes(into.size()) bytes) to `into`.
void add_decoded_int8(const std::uint8_t* in, std::span<float> into);

/// Fragments of parameters by layer: `count` contiguous ranges [begin, end) of parameter
/// indices, whole layers each, of about equal element counts (fewer when there are fewer
/// layers). `numel` and `layer_of` per parameter, layers non-decreasing.
std::vector<std::pair<std::size_t, std::size_t>> fragments_by_layer(const std::vector<std::int64_t>& numel,
                                                                    const std::vector<int>& layer_of, int count);

}  // namespace sailor::train::detail
