// A node leaving with notice hands the state it keeps in memory over to a node that stays
// (train/shard_service.hpp): two shard servers on loopback TCP in this process. The shard
// arrives byte for byte in the receiver's memory, its node is told, and it is then served to
// a third party like any shard; a writer's copy of a checkpoint shard is taken the same way;
// what is not a shard of an iteration folder is refused and changes nothing.
// A shard several nodes hold is fetched in parts from all of them at once, and whole when one
// of them is gone.

#if __has_include(<sailor/train/shard_service.hpp>) && defined(SAILOR_WITH_TRAIN)

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <vector>

#include "sailor/train/shard_service.hpp"
#include "loopback_tcp.hpp"
#include "temp_file.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_shard_handover {

using namespace std::chrono_literals;
using sailor::testing::temp_dir;
namespace comm = sailor::comm;
namespace train = sailor::train;

namespace {

std::unique_ptr<comm::transport> tcp(const std::string& name) {
  return sailor::testing::loopback_tcp(name, "handover-test-token-0123456789abcdef");
}

std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::byte>((i * 131 + 7) % 251);
  return v;
}

}  // namespace

TEST_CASE("shard handover: a leaving node's in-memory shard is held and served by the node that takes it") {
  temp_dir dir;
  auto leaving_transport = tcp("leaving");
  auto staying_transport = tcp("staying");
  auto staying_memory = std::make_shared<train::memory_shards>();
  std::mutex mu;
  std::vector<std::pair<std::string, std::int64_t>> told;
  staying_memory->set_handover_listener([&](const std::string& path, std::int64_t bytes) {
    std::lock_guard lock{mu};
    told.emplace_back(path, bytes);
  });
  auto server = train::shard_server::start(*staying_transport, "127.0.0.1", dir.path("staying"),
                                           staying_memory);
  REQUIRE(server);

  const std::string path = "checkpoints/job/mem/iter-00000004/shard-a-w1-of-2-layers-3-6-tp0-of-1.ckpt";
  auto shard = std::make_shared<const std::vector<std::byte>>(pattern(3 << 20));
  auto err = train::hand_over_shard(*leaving_transport, (*server)->address(), path, shard, 10s);
  REQUIRE_MESSAGE(!err, (err ? err->message : ""));
  auto held = staying_memory->get(path);
  REQUIRE(held);
  CHECK(*held == *shard);
  {
    std::lock_guard lock{mu};
    REQUIRE(told.size() == 1);
    CHECK(told[0].first == path);
    CHECK(told[0].second == static_cast<std::int64_t>(shard->size()));
  }

  // A third node restores from the node that took it.
  std::int64_t fetched = 0;
  auto fetch = train::fetch_shards(*leaving_transport, dir.path("third"),
                                   {{path, (*server)->address()}}, 10s, &fetched);
  REQUIRE_MESSAGE(!fetch, (fetch ? fetch->message : ""));
  CHECK(fetched == static_cast<std::int64_t>(shard->size()));
  std::ifstream in(std::filesystem::path{dir.path("third")} / path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(chars.size() == shard->size());
  CHECK(std::equal(chars.begin(), chars.end(), reinterpret_cast<const char*>(shard->data())));

  // A writer's copy of a checkpoint shard of a plan folder is taken the same way (the
  // checkpoint then outlives the writer's stage); what is not a shard of an iteration folder,
  // or a path out of the state folder, is refused and changes nothing.
  const std::string disk = "checkpoints/job/v1/iter-00000004/shard-a-w1-of-2-layers-3-6-tp0-of-1.ckpt";
  err = train::hand_over_shard(*leaving_transport, (*server)->address(), disk, shard, 10s);
  REQUIRE_MESSAGE(!err, (err ? err->message : ""));
  REQUIRE(staying_memory->get(disk));
  CHECK(*staying_memory->get(disk) == *shard);
  CHECK(train::hand_over_shard(*leaving_transport, (*server)->address(),
                               "checkpoints/job/mem/../../../etc/x", shard, 10s));
  const std::string not_an_iteration = "checkpoints/job/v1/latest/shard-a-w1-of-2-layers-3-6-tp0-of-1.ckpt";
  CHECK(train::hand_over_shard(*leaving_transport, (*server)->address(), not_an_iteration, shard, 10s));
  CHECK(train::handover_path(path));
  CHECK_FALSE(train::handover_path(disk));
  CHECK(train::shard_copy_path(disk));
  CHECK(train::shard_copy_path(path));
  CHECK_FALSE(train::shard_copy_path(not_an_iteration));
  CHECK_FALSE(train::shard_copy_path("checkpoints/job/mem/iter-00000004"));
  CHECK(staying_memory->get(not_an_iteration) == nullptr);
  std::lock_guard lock{mu};
  REQUIRE(told.size() == 2);
  CHECK(told[1].first == disk);
}

TEST_CASE("shard copies: a node drops the copies of plan folders no plan restores from, keeps the survivors' memory, and the newest two iterations of a folder") {
  train::memory_shards memory;
  const auto file = [](const std::string& folder, int iteration) {
    char name[32];
    std::snprintf(name, sizeof name, "iter-%08d", iteration);
    return "checkpoints/job/" + folder + "/" + name + "/shard-a-w0-of-1-layers-0-6-tp0-of-1.ckpt";
  };
  for (int it : {2, 4, 6})
    memory.put(file("v1", it), pattern(16));
  memory.put(file("v2", 8), pattern(16));
  memory.put(file("mem", 7), pattern(16));
  // Like the checkpoints on the writer's disk: the newest two iterations of v1 stay.
  CHECK(memory.get(file("v1", 2)) == nullptr);
  CHECK(memory.get(file("v1", 4)));
  CHECK(memory.drop_plan_folders("checkpoints/job", {"checkpoints/job/v2"}) == 2);
  CHECK(memory.get(file("v1", 6)) == nullptr);
  CHECK(memory.get(file("v2", 8)));
  CHECK(memory.get(file("mem", 7)));
  CHECK(memory.drop_plan_folders("checkpoints/other", {}) == 0);
  CHECK(memory.get(file("v2", 8)));
}

namespace {

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

bool same(const std::vector<char>& a, const std::vector<std::byte>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), reinterpret_cast<const char*>(b.data()));
}

}  // namespace

TEST_CASE("shard fetch: a shard two nodes hold comes in parts from both, and from the one left when the other is gone") {
  temp_dir dir;
  auto fetcher = tcp("fetcher");
  auto holder_a = tcp("holder-a");
  auto holder_b = tcp("holder-b");
  const std::string path = "checkpoints/job/mem/iter-00000002/shard-b-w0-of-1-layers-0-6-tp0-of-1.ckpt";
  const auto shard = pattern((9 << 20) + 12345);  // over the size that is split; odd length
  auto memory_a = std::make_shared<train::memory_shards>();
  auto memory_b = std::make_shared<train::memory_shards>();
  memory_a->put(path, shard);
  memory_b->put(path, shard);
  auto a = train::shard_server::start(*holder_a, "127.0.0.1", dir.path("a"), memory_a);
  auto b = train::shard_server::start(*holder_b, "127.0.0.1", dir.path("b"), memory_b);
  REQUIRE(a);
  REQUIRE(b);
  std::int64_t fetched = 0;
  auto err = train::fetch_shards(*fetcher, dir.path("both"),
                                 {{path, (*a)->address()}, {path, (*b)->address()}}, 10s, &fetched);
  REQUIRE_MESSAGE(!err, (err ? err->message : ""));
  CHECK(fetched == static_cast<std::int64_t>(shard.size()));
  CHECK(same(file_bytes(std::filesystem::path{dir.path("both")} / path), shard));

  // Holder a is gone: its part comes from b.
  const auto gone = (*a)->address();
  a->reset();
  fetched = 0;
  err = train::fetch_shards(*fetcher, dir.path("one"), {{path, gone}, {path, (*b)->address()}},
                            10s, &fetched);
  REQUIRE_MESSAGE(!err, (err ? err->message : ""));
  CHECK(fetched == static_cast<std::int64_t>(shard.size()));
  CHECK(same(file_bytes(std::filesystem::path{dir.path("one")} / path), shard));
}

}  // namespace integration_shard_handover
#endif
