// The checkpoint index on hand-made folders (no LibTorch, no training): names, completeness
// per writer group, and pruning.

#include <sailor/train/checkpoint.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "temp_file.hpp"
#include "sailor/train/checkpoint_files.hpp"

namespace {

using namespace sailor;
namespace fs = std::filesystem;
using train::detail::shard_file;

shard_file shard(const std::string& group, int writer, int writers) {
  shard_file f;
  f.group = group;
  f.writer = writer;
  f.writers = writers;
  f.first_layer = writer;
  f.end_layer = writer + 1;
  return f;
}

void touch(const std::string& folder, const shard_file& f) {
  fs::create_directories(folder);
  std::ofstream(fs::path(folder) / train::detail::shard_file_name(f)) << "x";
}

// A checkpoint of `writers` files of group `group` after n iterations; `missing` writer left out.
void make_checkpoint(const std::string& dir, int n, const std::string& group, int writers,
                     int missing = -1) {
  for (int w = 0; w < writers; ++w)
    if (w != missing) touch(train::checkpoint_path(dir, n), shard(group, w, writers));
}

}  // namespace

TEST_CASE("checkpoint index: shard file names round-trip and reject anything else") {
  // Writer 2 of 3 holds layers 3..5 (more than shard()'s one layer a writer), TP rank 0 of 1.
  shard_file f = shard(train::detail::layout_hash("0-3/2;3-6/1;"), 2, 3);
  f.first_layer = 3;
  f.end_layer = 6;
  auto name = train::detail::shard_file_name(f);
  auto back = train::detail::parse_shard_file_name(name);
  REQUIRE(back.has_value());
  CHECK(back->group == f.group);
  CHECK(back->writer == 2);
  CHECK(back->writers == 3);
  CHECK(back->first_layer == 3);
  CHECK(back->end_layer == 6);
  CHECK(back->tp_size == 1);
  CHECK_FALSE(train::detail::parse_shard_file_name("." + name + ".tmp"));
  CHECK_FALSE(train::detail::parse_shard_file_name(name + "x"));
  CHECK_FALSE(train::detail::parse_shard_file_name("shard-0123456789abcdef-w3-of-3-layers-0-1-tp0-of-1.ckpt"));
  CHECK_FALSE(train::detail::parse_shard_file_name("shard-0123456789abcdef-w0-of-1-layers-0-1-tp1-of-1.ckpt"));
  CHECK(train::detail::parse_shard_file_name("shard-0123456789abcdef-w0-of-1-layers-0-1-tp0-of-1.ckpt"));
  CHECK(train::detail::layout_hash("a") != train::detail::layout_hash("b"));
  CHECK(train::checkpoint_path("/x", 12) == "/x/iter-00000012");
}

TEST_CASE("checkpoint index: the latest complete checkpoint, by writer group") {
  testing::temp_dir dir;
  const auto d = (dir.root() / "ckpt").string();
  CHECK(train::latest_checkpoint(d) == 0);
  const std::string a = "00000000000000aa", b = "00000000000000bb";
  make_checkpoint(d, 5, a, 3);
  make_checkpoint(d, 10, a, 3, /*missing=*/1);  // a writer died
  CHECK(train::latest_checkpoint(d) == 5);
  // A new plan (another group) writes checkpoint 10 completely next to the stale files.
  make_checkpoint(d, 10, b, 2);
  CHECK(train::latest_checkpoint(d) == 10);
  auto state = train::detail::inspect_folder(train::checkpoint_path(d, 10));
  REQUIRE(state.complete.size() == 2);
  for (const auto& f : state.complete) CHECK(f.group == b);
  // Mixed groups never add up to a complete one.
  make_checkpoint(d, 15, a, 2, 0);
  make_checkpoint(d, 15, b, 2, 1);
  CHECK(train::latest_checkpoint(d) == 10);
  auto partial = train::detail::inspect_folder(train::checkpoint_path(d, 15));
  CHECK(partial.complete.empty());
  CHECK(partial.best_found == 1);
  CHECK(partial.best_needed == 2);
  // Stray folders and files are ignored.
  fs::create_directories(fs::path(d) / "iter-x");
  std::ofstream(fs::path(d) / "iter-00000020") << "not a folder";
  CHECK(train::latest_checkpoint(d) == 10);
}

TEST_CASE("checkpoint index: pruning keeps the newest complete checkpoints and newer partial ones") {
  testing::temp_dir dir;
  const auto d = (dir.root() / "ckpt").string();
  const std::string g = "0000000000000001";
  make_checkpoint(d, 1, g, 2);
  make_checkpoint(d, 2, g, 2, 0);  // partial, older than the kept ones
  make_checkpoint(d, 3, g, 2);
  train::detail::prune_checkpoints(d, 2);
  CHECK(train::detail::checkpoint_iterations(d) == std::vector<int>{1, 2, 3});  // 1 and 3 are kept
  make_checkpoint(d, 4, g, 2);
  make_checkpoint(d, 5, g, 2, 1);  // being written
  train::detail::prune_checkpoints(d, 2);
  CHECK(train::detail::checkpoint_iterations(d) == std::vector<int>{3, 4, 5});
  CHECK(train::latest_checkpoint(d) == 4);
}

TEST_CASE("checkpoint index: a writer never prunes the checkpoint a pending plan restores") {
  testing::temp_dir dir;
  const auto d = (dir.root() / "v3").string();
  const std::string g = "0000000000000001";
  for (int n = 1; n <= 4; ++n)
    make_checkpoint(d, n, g, 1);
  const auto pinned = fs::path{train::checkpoint_path(d, 1)}.lexically_normal().string();
  train::detail::prune_writer_files(d, shard(g, 0, 1), 2,
                                    [&](const std::string& folder) { return folder == pinned; });
  CHECK(train::detail::checkpoint_iterations(d) == std::vector<int>{1, 3, 4});
  train::detail::prune_writer_files(d, shard(g, 0, 1), 2);
  CHECK(train::detail::checkpoint_iterations(d) == std::vector<int>{3, 4});
}

TEST_CASE("checkpoint index: the plan folders no plan restores from are removed") {
  testing::temp_dir dir;
  const auto job = dir.root() / "checkpoints" / "job";
  const std::string g = "0000000000000001";
  for (auto v : {"v1", "v2", "v3", "v4"})
    make_checkpoint((job / v).string(), 2, g, 1);
  fs::create_directories(job / "notes");
  // Copies of survivors' memory state, one per re-plan: the newest two and the one a pending
  // plan restores (named in keep) stay.
  for (int n = 1; n <= 5; ++n)
    make_checkpoint((job / "mem").string(), n, g, 1);
  const auto pinned = train::checkpoint_path((job / "mem").string(), 2);
  auto removed = train::remove_plan_folders(
    job.string(), {(job / "v2").string(), (job / "v4/").string(), pinned});
  CHECK(removed.size() == 4);
  CHECK(train::detail::checkpoint_iterations((job / "mem").string()) == std::vector<int>{2, 4, 5});
  CHECK_FALSE(fs::exists(job / "v1"));
  CHECK(fs::exists(job / "v2"));
  CHECK_FALSE(fs::exists(job / "v3"));
  CHECK(fs::exists(job / "v4"));
  CHECK(fs::exists(job / "notes"));  // not a plan folder
}
