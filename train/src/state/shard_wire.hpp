#pragma once
// Private to the shard service (shard_service.cpp serves, shard_client.cpp asks): the words of
// its small request protocol on a transport connection (a control frame per request; the shard
// comes back as a tensor frame), and helpers both sides use. No LibTorch here.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::train::shard_wire {

inline constexpr std::string_view get_prefix = "get ";      ///< get <path>: the whole file
inline constexpr std::string_view error_prefix = "error ";  ///< error <why>: refused
inline constexpr std::string_view stored_reply = "stored";  ///< a handed-over shard is kept
inline constexpr std::string_view stat_prefix = "stat ";    ///< stat <path>: its size
inline constexpr std::string_view range_prefix = "range ";  ///< range <offset> <bytes> <path>
inline constexpr std::string_view size_prefix = "size ";    ///< size <bytes>: stat's answer

inline std::vector<std::byte> bytes_of(std::string_view text) {
  auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

inline std::string text_of(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

inline sailor::error failure(const std::string& what) {
  return sailor::error{error_kind::failed, what, "", 0, ""};
}

}  // namespace sailor::train::shard_wire
