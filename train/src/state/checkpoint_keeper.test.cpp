// The coordinator's checkpoint keeper (no LibTorch): shard files fetched from a node's shard
// server over TCP into the keeper's folder, served again from there byte for byte, pruned to
// the newest complete checkpoints of the newest plan folders; a failed fetch is tried again
// from the next holder that reports the file.

#include <sailor/train/checkpoint_keeper.hpp>

#include <doctest/doctest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "sailor/comm/tcp.hpp"
#include "sailor/train/checkpoint.hpp"
#include "sailor/train/checkpoint_files.hpp"
#include "sailor/train/shard_service.hpp"
#include "temp_file.hpp"

namespace {

using namespace sailor;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::unique_ptr<comm::transport> tcp(const std::string& name) {
  comm::transport_options o;
  o.local_name = name;
  auto t = comm::make_tcp_transport(o);
  REQUIRE(t.ok());
  return std::move(*t);
}

// Writer `writer` of 2's shard of checkpoint `iterations` in plan folder `plan` of job "j",
// under `state`: its path relative to `state`. The bytes name the file (the keeper moves
// bytes, it does not read them).
std::string write_shard(const fs::path& state, int plan, int iterations, int writer) {
  train::detail::shard_file f;
  f.group = "0123456789abcdef";
  f.writer = writer;
  f.writers = 2;
  f.first_layer = writer;
  f.end_layer = writer + 1;
  const auto folder = fs::path{train::checkpoint_path("checkpoints/j/v" + std::to_string(plan), iterations)};
  const auto rel = (folder / train::detail::shard_file_name(f)).string();
  fs::create_directories(state / folder);
  std::ofstream(state / rel, std::ios::binary) << "shard " << rel << std::string(5000, 'x');
  return rel;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// What the keeper told, and a bounded wait for it.
struct told {
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> files;
  std::string keeper;
  train::checkpoint_keeper::kept_fn fn() {
    return [this](const std::string& file, const std::string& who) {
      std::lock_guard lock{mu};
      files.insert(file);
      keeper = who;
      cv.notify_all();
    };
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock{mu};
    return cv.wait_for(lock, 20s, [&] { return files.size() >= n; });
  }
};

struct holder_and_keeper {
  testing::temp_dir dir;
  std::unique_ptr<comm::transport> node_t = tcp("node"), keeper_t = tcp("coordinator");
  told heard;  // outlives the keeper, whose thread tells it
  std::unique_ptr<train::shard_server> node;
  std::unique_ptr<train::checkpoint_keeper> keeper;
  holder_and_keeper() {
    auto s = train::shard_server::start(*node_t, "127.0.0.1", dir.path("node"));
    REQUIRE(s.ok());
    node = std::move(*s);
    train::checkpoint_keeper_options o;
    o.state_dir = dir.path("keeper");
    o.host = "127.0.0.1";
    o.timeout = 5000ms;
    auto k = train::checkpoint_keeper::start(*keeper_t, o);
    REQUIRE(k.ok());
    keeper = std::move(*k);
    keeper->on_kept(heard.fn());
  }
  fs::path node_dir() { return dir.path("node"); }
  fs::path keeper_dir() { return dir.path("keeper"); }
};

}  // namespace

TEST_CASE_FIXTURE(holder_and_keeper, "checkpoint keeper: every reported shard lands in its folder and is served from there") {
  std::vector<std::string> files;
  for (int it : {2, 4, 6, 8})
    for (int w : {0, 1})
      files.push_back(write_shard(node_dir(), 1, it, w));
  for (const auto& f : files)
    keeper->keep(f, node->address());
  keeper->keep(files[0], node->address());  // reported twice (a writer and a copy): once
  REQUIRE(heard.wait_for(8));  // in order: iteration 2 is pruned once 8 is complete
  CHECK(heard.files.size() == 8);  // the one reported twice was fetched once
  CHECK(heard.keeper == keeper->address());
  const auto plan_dir = (keeper_dir() / "checkpoints/j/v1").string();
  CHECK(train::latest_checkpoint(plan_dir) == 8);
  CHECK(train::detail::checkpoint_iterations(plan_dir) == std::vector<int>{4, 6, 8});
  // A rank of a later plan, on another node, fetches from the keeper as from any holder.
  auto fetcher_t = tcp("fetcher");
  std::int64_t bytes = 0;
  auto err = train::fetch_shards(*fetcher_t, dir.path("new-node"), {{files[7], keeper->address()}},
                                 5000ms, &bytes);
  REQUIRE_FALSE(err.has_value());
  CHECK(slurp(fs::path{dir.path("new-node")} / files[7]) == slurp(node_dir() / files[7]));
  CHECK(bytes == static_cast<std::int64_t>(fs::file_size(node_dir() / files[7])));
}

TEST_CASE_FIXTURE(holder_and_keeper, "checkpoint keeper: older plan folders go once two newer ones hold a complete checkpoint") {
  for (int plan : {1, 2, 3})
    for (int w : {0, 1})
      keeper->keep(write_shard(node_dir(), plan, 2 * plan, w), node->address());
  REQUIRE(heard.wait_for(6));
  const auto job = keeper_dir() / "checkpoints/j";
  CHECK_FALSE(fs::exists(job / "v1"));
  CHECK(train::latest_checkpoint((job / "v2").string()) == 4);
  CHECK(train::latest_checkpoint((job / "v3").string()) == 6);
  // A newer plan's checkpoint still arriving (one writer of two) stays.
  keeper->keep(write_shard(node_dir(), 4, 8, 0), node->address());
  REQUIRE(heard.wait_for(7));
  CHECK(fs::exists(job / "v4"));
  CHECK(fs::exists(job / "v2"));
}

TEST_CASE_FIXTURE(holder_and_keeper, "checkpoint keeper: a holder that is gone fails the fetch, and the next holder's report is fetched") {
  const auto file = write_shard(node_dir(), 1, 2, 0);
  const auto other = write_shard(node_dir(), 1, 2, 1);
  keeper->keep(file, "127.0.0.1:1");  // nobody listens there
  keeper->keep("checkpoints/j/mem/iter-00000002/" + fs::path{file}.filename().string(),
               node->address());  // the survivors' memory: not the keeper's business
  // Fetches run in order: once `other` is kept, the fetch of `file` has failed.
  keeper->keep(other, node->address());
  REQUIRE(heard.wait_for(1));
  CHECK(keeper->failed() == 1);
  CHECK(heard.files == std::set<std::string>{other});
  keeper->keep(file, node->address());
  REQUIRE(heard.wait_for(2));
  CHECK(heard.files == std::set<std::string>{file, other});
}

TEST_CASE("checkpoint keeper: a wildcard address is refused, naming --listen") {
  testing::temp_dir dir;
  auto t = tcp("coordinator");
  train::checkpoint_keeper_options o;
  o.state_dir = dir.path("keeper");
  o.host = "0.0.0.0";
  auto k = train::checkpoint_keeper::start(*t, o);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().to_string().find("--listen") != std::string::npos);
}
