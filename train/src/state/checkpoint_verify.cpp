// Checking a checkpoint before it is trusted (no LibTorch: the coordinator picks the
// checkpoint a plan resumes from with it, and the ranks check each file they restore from).
// Every tensor of a shard carries the CRC-32 of its bytes in the shard's header; a file
// whose header does not parse, whose data section is shorter or longer than the header says,
// or one of whose tensors does not match its checksum is refused, named in the error.

#include <sailor/train/checkpoint.hpp>

#include <zlib.h>

#include <algorithm>
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

std::optional<std::uint32_t> shard_bytes::crc(std::uint32_t crc, std::uint64_t offset,
                                              std::uint64_t n) {
  std::vector<char> buffer(static_cast<std::size_t>(std::min<std::uint64_t>(n, 1u << 20)));
  for (std::uint64_t left = n; left > 0;) {
    const auto chunk = std::min<std::uint64_t>(left, buffer.size());
    if (!read(offset, buffer.data(), chunk))
      return std::nullopt;
    crc = checkpoint_crc(crc, buffer.data(), chunk);
    offset += chunk;
    left -= chunk;
  }
  return crc;
}

namespace {

class file_bytes final : public shard_bytes {
public:
  file_bytes(std::string path, std::uint64_t size) : path_(std::move(path)), size_(size) {}
  bool open() {
    in_.open(path_, std::ios::binary);
    return static_cast<bool>(in_);
  }
  const std::string& name() const override { return path_; }
  std::uint64_t size() const override { return size_; }
  bool read(std::uint64_t offset, void* dest, std::uint64_t n) override {
    if (offset > size_ || n > size_ - offset)
      return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(in_.read(static_cast<char*>(dest), static_cast<std::streamsize>(n)));
  }

private:
  std::string path_;
  std::uint64_t size_;
  std::ifstream in_;
};

class memory_bytes final : public shard_bytes {
public:
  memory_bytes(std::string name, std::vector<std::span<const std::byte>> parts)
      : name_(std::move(name)), parts_(std::move(parts)) {
    for (const auto& p : parts_) {
      starts_.push_back(size_);
      size_ += p.size();
    }
  }
  const std::string& name() const override { return name_; }
  std::uint64_t size() const override { return size_; }
  bool read(std::uint64_t offset, void* dest, std::uint64_t n) override {
    auto* out = static_cast<char*>(dest);
    return visit(offset, n, [&](const std::byte* p, std::uint64_t k) {
      std::memcpy(out, p, k);
      out += k;
    });
  }
  std::optional<std::uint32_t> crc(std::uint32_t crc, std::uint64_t offset,
                                   std::uint64_t n) override {
    if (!visit(offset, n, [&](const std::byte* p, std::uint64_t k) { crc = checkpoint_crc(crc, p, k); }))
      return std::nullopt;
    return crc;
  }

private:
  // Calls `f` on the pieces of [offset, offset + n), part by part; false past the end.
  template <class F>
  bool visit(std::uint64_t offset, std::uint64_t n, F&& f) const {
    if (offset > size_ || n > size_ - offset)
      return false;
    auto k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                                      starts_.begin());
    for (k = k == 0 ? 0 : k - 1; n > 0 && k < parts_.size(); ++k) {
      const auto within = offset - starts_[k];
      const auto take = std::min<std::uint64_t>(n, parts_[k].size() - within);
      f(parts_[k].data() + within, take);
      offset += take;
      n -= take;
    }
    return n == 0;
  }

  std::string name_;
  std::vector<std::span<const std::byte>> parts_;
  std::vector<std::uint64_t> starts_;
  std::uint64_t size_ = 0;
};

}  // namespace

std::unique_ptr<shard_bytes> open_shard_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec)
    return nullptr;
  auto f = std::make_unique<file_bytes>(path, size);
  if (!f->open())
    return nullptr;
  return f;
}

std::unique_ptr<shard_bytes> shard_in_memory(std::string name,
                                             std::vector<std::span<const std::byte>> parts) {
  return std::make_unique<memory_bytes>(std::move(name), std::move(parts));
}

std::optional<std::string> verify_shard(const std::string& path) {
  auto file = open_shard_file(path);
  if (!file) return path + ": cannot be opened";
  return verify_shard(*file);
}

std::optional<std::string> verify_shard(shard_bytes& shard) {
  constexpr char magic[] = "SAILORCKPT1\n";
  constexpr std::size_t magic_bytes = sizeof(magic) - 1;
  const auto& path = shard.name();
  const auto size = shard.size();
  char head[magic_bytes + 8];
  if (!shard.read(0, head, sizeof head) || std::memcmp(head, magic, magic_bytes) != 0)
    return path + " is not a checkpoint file";
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[magic_bytes + i])) << (8 * i);
  if (length > size - sizeof head || length > (std::uint64_t{64} << 20))
    return path + " is truncated (its header length is past the end)";
  std::string text(length, '\0');
  if (!shard.read(sizeof head, text.data(), length))
    return path + " is truncated";
  const std::uint64_t data_start = sizeof head + length;
  try {
    auto header = nlohmann::json::parse(text);
    const auto data_bytes = header.at("data_bytes").get<std::uint64_t>();
    if (data_start + data_bytes != size)
      return path + " is truncated or padded (" + std::to_string(size) + " bytes, the header says " +
             std::to_string(data_start + data_bytes) + ")";
    // Tensors lie back to back in header order: one pass over the data section.
    std::uint64_t expected_offset = 0;
    for (const auto& t : header.at("tensors")) {
      const auto offset = t.at("offset").get<std::uint64_t>();
      const auto bytes = t.at("bytes").get<std::uint64_t>();
      if (!t.contains("crc32"))
        return path + ": tensor " + t.at("name").get<std::string>() + " has no checksum";
      if (offset != expected_offset || bytes > data_bytes - offset)
        return path + ": tensor " + t.at("name").get<std::string>() + " lies outside the data";
      auto crc = shard.crc(0, data_start + offset, bytes);
      if (!crc)
        return path + " is truncated";
      if (*crc != t.at("crc32").get<std::uint32_t>())
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
