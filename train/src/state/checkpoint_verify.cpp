// Checking a checkpoint before it is trusted (no LibTorch: the coordinator picks the
// checkpoint a plan resumes from with it, and the ranks check each file they restore from).
// Every tensor of a shard carries the CRC-32 of its bytes in the shard's header; a file
// whose header does not parse, whose data section is shorter or longer than the header says,
// or one of whose tensors does not match its checksum is refused, named in the error.

#include <sailor/train/checkpoint.hpp>

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/config/log.hpp"
#include "sailor/train/checkpoint_files.hpp"

namespace sailor::train {
namespace detail {

namespace fs = std::filesystem;

std::uint32_t checkpoint_crc(std::uint32_t crc, const void* data, std::uint64_t bytes) {
  auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    const auto chunk = static_cast<uInt>(std::min<std::uint64_t>(bytes, 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

std::optional<std::string> verify_shard(const std::string& path) {
  constexpr char magic[] = "SAILORCKPT1\n";
  constexpr std::size_t magic_bytes = sizeof(magic) - 1;
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot be opened";
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  char head[magic_bytes + 8];
  if (ec || !in.read(head, sizeof head) || std::memcmp(head, magic, magic_bytes) != 0)
    return path + " is not a checkpoint file";
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[magic_bytes + i])) << (8 * i);
  if (length > size - sizeof head || length > (std::uint64_t{64} << 20))
    return path + " is truncated (its header length is past the end)";
  std::string text(length, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length)))
    return path + " is truncated";
  const std::uint64_t data_start = sizeof head + length;
  try {
    auto header = nlohmann::json::parse(text);
    const auto data_bytes = header.at("data_bytes").get<std::uint64_t>();
    if (data_start + data_bytes != size)
      return path + " is truncated or padded (" + std::to_string(size) + " bytes, the header says " +
             std::to_string(data_start + data_bytes) + ")";
    // Tensors lie back to back in header order: one pass over the data section.
    std::vector<char> buffer(std::size_t{1} << 20);
    std::uint64_t expected_offset = 0;
    for (const auto& t : header.at("tensors")) {
      const auto offset = t.at("offset").get<std::uint64_t>();
      const auto bytes = t.at("bytes").get<std::uint64_t>();
      if (!t.contains("crc32"))
        return path + ": tensor " + t.at("name").get<std::string>() + " has no checksum";
      if (offset != expected_offset || bytes > data_bytes - offset)
        return path + ": tensor " + t.at("name").get<std::string>() + " lies outside the data";
      std::uint32_t crc = 0;
      for (std::uint64_t left = bytes; left > 0;) {
        const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
        if (!in.read(buffer.data(), static_cast<std::streamsize>(chunk)))
          return path + " is truncated";
        crc = checkpoint_crc(crc, buffer.data(), chunk);
        left -= chunk;
      }
      if (crc != t.at("crc32").get<std::uint32_t>())
        return path + ": tensor " + t.at("name").get<std::string>() + " (" +
               t.at("state").get<std::string>() + ") does not match its checksum: the file is "
               "corrupt";
      expected_offset += bytes;
    }
    if (expected_offset != data_bytes) return path + ": the data section holds more than its tensors";
  } catch (const std::exception& e) {
    return path + ": malformed header: " + e.what();
  }
  return std::nullopt;
}

}  // namespace detail

std::optional<std::string> verify_checkpoint_shard(const std::string& path) {
  return detail::verify_shard(path);
}

int latest_verified_checkpoint(const std::string& dir) {
  auto all = detail::checkpoint_iterations(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (*it <= 0) continue;
    auto state = detail::inspect_folder(checkpoint_path(dir, *it));
    if (state.complete.empty()) continue;
    std::optional<std::string> bad;
    for (const auto& f : state.complete)
      if ((bad = detail::verify_shard(f.path))) break;
    if (!bad) return *it;
    log::get("train")->warn("[checkpoint] not resuming from {}: {}; trying an earlier one",
                            checkpoint_path(dir, *it), *bad);
  }
  return 0;
}

}  // namespace sailor::train
