// Checkpoints that verify (no LibTorch): hand-made shard files in the writer's format, with
// a CRC-32 per tensor. A corrupt, truncated or padded shard is refused with the file named,
// and the resume point falls back to the previous complete checkpoint.

#include <sailor/train/checkpoint.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "temp_file.hpp"
#include "sailor/train/checkpoint_files.hpp"

namespace {

using namespace sailor;
namespace fs = std::filesystem;
using train::detail::shard_file;

// Writes one shard of `writers` with two tensors of `floats` floats each, as the writer does.
std::string write_shard(const std::string& dir, int iterations, int writer, int writers,
                        std::size_t floats = 256) {
  shard_file f;
  f.group = "0123456789abcdef";
  f.writer = writer;
  f.writers = writers;
  f.first_layer = writer;
  f.end_layer = writer + 1;
  std::vector<float> a(floats), b(floats);
  for (std::size_t i = 0; i < floats; ++i) {
    a[i] = 0.5f * static_cast<float>(i + iterations);
    b[i] = -1.0f * static_cast<float>(i);
  }
  const std::uint64_t bytes = floats * sizeof(float);
  nlohmann::json header;
  header["format"] = 1;
  header["iterations"] = iterations;
  header["data_bytes"] = 2 * bytes;
  header["tensors"] = nlohmann::json::array(
    {{{"name", "w"}, {"state", "param"}, {"offset", 0}, {"bytes", bytes},
      {"crc32", train::detail::checkpoint_crc(0, a.data(), bytes)}},
     {{"name", "w"}, {"state", "exp_avg"}, {"offset", bytes}, {"bytes", bytes},
      {"crc32", train::detail::checkpoint_crc(0, b.data(), bytes)}}});
  const std::string text = header.dump();
  auto folder = train::checkpoint_path(dir, iterations);
  fs::create_directories(folder);
  auto path = (fs::path(folder) / train::detail::shard_file_name(f)).string();
  std::ofstream out(path, std::ios::binary);
  out.write("SAILORCKPT1\n", 12);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i)));
  out << text;
  out.write(reinterpret_cast<const char*>(a.data()), static_cast<std::streamsize>(bytes));
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(bytes));
  return path;
}

void overwrite(const std::string& path, std::uint64_t at, const std::string& bytes) {
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.seekp(static_cast<std::streamoff>(at));
  io.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool mentions(const std::optional<std::string>& why, const std::string& what) {
  return why && why->find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("checkpoint verify: an intact shard verifies") {
  testing::temp_dir d;
  auto p = write_shard(d.root().string(), 4, 0, 1);
  CHECK_FALSE(train::detail::verify_shard(p).has_value());
}

TEST_CASE("checkpoint verify: flipped bytes, random bytes, truncation and padding are caught, the file named") {
  testing::temp_dir d;
  const auto size_of = [](const std::string& p) { return fs::file_size(p); };
  SUBCASE("4 KiB of random bytes in the data") {
    auto p = write_shard(d.root().string(), 4, 0, 1, 2048);
    std::string junk(4096, '\0');
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 7919 % 251);
    overwrite(p, size_of(p) - 6000, junk);
    auto why = train::detail::verify_shard(p);
    CHECK(mentions(why, p));
    CHECK(mentions(why, "does not match its checksum"));
  }
  SUBCASE("zeroed data") {
    auto p = write_shard(d.root().string(), 4, 0, 1);
    overwrite(p, size_of(p) - 512, std::string(512, '\0'));
    CHECK(mentions(train::detail::verify_shard(p), "does not match its checksum"));
  }
  SUBCASE("truncated") {
    auto p = write_shard(d.root().string(), 4, 0, 1);
    fs::resize_file(p, size_of(p) - 100);
    CHECK(mentions(train::detail::verify_shard(p), "truncated"));
  }
  SUBCASE("padded") {
    auto p = write_shard(d.root().string(), 4, 0, 1);
    fs::resize_file(p, size_of(p) + 100);
    CHECK(mentions(train::detail::verify_shard(p), "truncated or padded"));
  }
  SUBCASE("bad magic") {
    auto p = write_shard(d.root().string(), 4, 0, 1);
    overwrite(p, 0, "XXXX");
    CHECK(mentions(train::detail::verify_shard(p), "not a checkpoint file"));
  }
  SUBCASE("a header length past the end") {
    auto p = write_shard(d.root().string(), 4, 0, 1);
    overwrite(p, 12, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
    CHECK(mentions(train::detail::verify_shard(p), "truncated"));
  }
}

TEST_CASE("checkpoint verify: a corrupt shard in the newest checkpoint falls back to the previous complete one") {
  testing::temp_dir d;
  const auto dir = d.root().string();
  write_shard(dir, 3, 0, 2);
  write_shard(dir, 3, 1, 2);
  write_shard(dir, 6, 0, 2);
  auto bad = write_shard(dir, 6, 1, 2);
  CHECK(train::latest_verified_checkpoint(dir) == 6);
  overwrite(bad, fs::file_size(bad) - 64, std::string(64, '\x5a'));
  CHECK(train::latest_checkpoint(dir) == 6);  // complete, but corrupt
  CHECK(train::latest_verified_checkpoint(dir) == 3);
  // Both corrupt: nothing to resume from (a fresh start), never a corrupt state.
  auto older = train::checkpoint_path(dir, 3);
  for (auto& e : fs::directory_iterator(older)) fs::resize_file(e.path(), 40);
  CHECK(train::latest_verified_checkpoint(dir) == 0);
}
