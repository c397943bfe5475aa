// Who may ask a node's shard server for what (shard_access.hpp), over loopback TCP with the
// job token: every peer below holds the token, so only its name and the plans the node was
// told of tell a node of the job from a stranger. A stranger fetches nothing, a node fetches
// only the layers its role needs, and hand-overs are kept only from nodes of the plan, for
// their own layers, for an iteration the plan reached, within a budget per peer.

#include <sailor/train/shard_access.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "sailor/comm/tcp.hpp"
#include "sailor/train/checkpoint.hpp"
#include "sailor/train/checkpoint_files.hpp"
#include "sailor/train/shard_service.hpp"
#include "temp_file.hpp"

namespace shard_access_test {

using namespace sailor;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sailor::testing::temp_dir;

std::unique_ptr<comm::transport> peer(const std::string& name) {
  comm::transport_options o;
  o.local_name = name;
  o.token = "shard-access-test-token-0123456789abcdef";
  auto t = comm::make_tcp_transport(o);
  REQUIRE(t.ok());
  return std::move(*t);
}

// The path of the shard of layers [first, end) after `iterations` in `folder` of job "j".
std::string shard(const std::string& folder, int iterations, int first, int end) {
  train::detail::shard_file f;
  f.group = "0123456789abcdef";
  f.writers = 1;
  f.first_layer = first;
  f.end_layer = end;
  return (fs::path{train::checkpoint_path("checkpoints/j/" + folder, iterations)} /
          train::detail::shard_file_name(f))
    .string();
}

// Plan v`version` of job "j": node a runs layers 0-3, nodes b and c layers 3-6.
train::plan_members plan(std::int64_t version, std::vector<std::string> first_stage = {"a"}) {
  train::plan_members p;
  p.version = version;
  p.checkpoint_dir = "checkpoints/j/v" + std::to_string(version);
  for (const auto& n : first_stage)
    p.nodes.push_back({n, {{0, 3}}});
  p.nodes.push_back({"b", {{3, 6}}});
  p.nodes.push_back({"c", {{3, 6}}});
  p.start_iteration = 4;
  p.end_iteration = 100;
  return p;
}

std::shared_ptr<const std::vector<std::byte>> bytes(std::size_t n) {
  return std::make_shared<const std::vector<std::byte>>(n, std::byte{7});
}

// Node c's shard server, with a checkpoint shard of layers 0-3 on its disk.
struct holder {
  temp_dir dir;
  std::unique_ptr<comm::transport> transport = peer("c");
  std::shared_ptr<train::memory_shards> memory = std::make_shared<train::memory_shards>();
  std::shared_ptr<train::shard_access> access;
  std::unique_ptr<train::shard_server> server;
  const std::string on_disk = shard("v2", 4, 0, 3);

  explicit holder(std::int64_t max_held = train::shard_access::default_max_held_bytes)
      : access(std::make_shared<train::shard_access>(max_held)) {
    access->set_self("c");
    access->plan(plan(2));
    fs::create_directories((fs::path{dir.path("c")} / on_disk).parent_path());
    std::ofstream(fs::path{dir.path("c")} / on_disk, std::ios::binary) << std::string(5000, 'x');
    auto s = train::shard_server::start(*transport, "127.0.0.1", dir.path("c"), memory, {},
                                        access);
    REQUIRE(s);
    server = std::move(*s);
  }

  // What `who` fetching `path` ends with: "" when it got the bytes, else the error.
  std::string fetch(const std::string& who, const std::string& path) {
    auto t = peer(who);
    auto got = train::fetch_into_memory(*t, {{path, server->address()}}, 10s);
    if (!got)
      return got.error().message;
    return got->size() == 1 && got->front().size() > 0 ? "" : "nothing came";
  }

  std::string hand_over(const std::string& who, const std::string& path, std::size_t n) {
    auto t = peer(who);
    auto err = train::hand_over_shard(*t, server->address(), path, bytes(n), 10s);
    return err ? err->message : "";
  }
};

TEST_CASE("shard access: a token holder that is no node of the plan fetches nothing, a node only the layers its role needs") {
  holder c;
  auto stranger = c.fetch("mallory", c.on_disk);
  CHECK(stranger.find("refused: 'mallory' is not a node of plan v2") != std::string::npos);
  auto other_layers = c.fetch("b", c.on_disk);
  CHECK(other_layers.find("refused: 'b' holds no layers 0-3 in plan v2") != std::string::npos);
  CHECK(c.fetch("a", c.on_disk).empty());
  // The coordinator's keeper keeps every shard.
  c.access->set_services({"coordinator-keeper"});
  CHECK(c.fetch("coordinator-keeper", c.on_disk).empty());

  // A node of the previous plan still fetches what its role there held (a holder may learn
  // of the next plan after the ranks that fetch from it); two plans later it is a stranger.
  c.access->plan(plan(3, {"d"}));
  CHECK(c.fetch("a", c.on_disk).empty());
  CHECK(c.fetch("d", c.on_disk).empty());
  c.access->plan(plan(4, {"d"}));
  CHECK(c.fetch("a", c.on_disk).find("'a' is not a node of plan v4 or plan v3") !=
        std::string::npos);
  c.access->plan(plan(4));  // told again: no change
  CHECK_FALSE(c.fetch("a", c.on_disk).empty());
  c.access->plan(plan(1));  // a restarted coordinator numbers its plans from 1 again
  CHECK(c.fetch("a", c.on_disk).empty());
}

TEST_CASE("shard access: a node told of no plan yet serves no node") {
  temp_dir dir;
  auto t = peer("c");
  auto access = std::make_shared<train::shard_access>();
  auto s = train::shard_server::start(*t, "127.0.0.1", dir.path("c"), {}, {}, access);
  REQUIRE(s);
  auto a = peer("a");
  auto got = train::fetch_into_memory(*a, {{shard("v2", 4, 0, 3), (*s)->address()}}, 10s);
  REQUIRE_FALSE(got);
  CHECK(got.error().message.find("told of no plan yet") != std::string::npos);
}

TEST_CASE("shard access: hand-overs are kept only from nodes of the plan, for their own layers and an iteration the plan reached") {
  holder c;
  const auto real = shard("mem", 5, 0, 3);
  CHECK(c.hand_over("mallory", real, 1000).find("refused: 'mallory' is not a node of plan v2") !=
        std::string::npos);
  CHECK(c.memory->get(real) == nullptr);
  // An iteration far ahead would push the real ones out of the newest two kept.
  const auto ahead = shard("mem", 999, 0, 3);
  CHECK(c.hand_over("a", ahead, 1000).find("iteration 999") != std::string::npos);
  CHECK(c.hand_over("a", shard("mem", 3, 0, 3), 1000).find("iteration 3") != std::string::npos);
  CHECK(c.hand_over("a", shard("mem", 5, 3, 6), 1000).find("'a' holds no layers 3-6") !=
        std::string::npos);
  CHECK(c.hand_over("a", shard("v7", 5, 0, 3), 1000).find("not in a folder of plan v2") !=
        std::string::npos);
  CHECK(c.memory->handed_over_bytes() == 0);

  CHECK(c.hand_over("a", real, 1000).empty());
  REQUIRE(c.memory->get(real));
  CHECK(c.memory->get(real)->size() == 1000);
  // A writer's copy of its checkpoint shard, once this node's ranks reached it.
  CHECK_FALSE(c.hand_over("b", shard("v2", 8, 3, 6), 1000).empty());
  c.access->completed(2, 7);
  CHECK(c.hand_over("b", shard("v2", 8, 3, 6), 1000).empty());
  // After a re-plan the nodes of the plan that ended still hand over what they kept.
  c.access->plan(plan(3, {"d"}));
  CHECK(c.hand_over("a", shard("mem", 6, 0, 3), 1000).empty());
  CHECK(c.memory->handed_over_bytes("a") == 2000);
}

TEST_CASE("shard access: a peer's hand-overs are bounded by its budget, and the node's by --max-held-state") {
  holder c{std::int64_t{4} << 20};  // 4 MiB: 2 MiB for each of a and b
  CHECK(c.access->budget_per_peer() == (std::int64_t{2} << 20));
  const auto real = shard("mem", 4, 0, 3);
  CHECK(c.hand_over("a", real, 1 << 20).empty());
  // Its state after two iterations is within its budget; one more MiB is not.
  CHECK(c.hand_over("a", shard("mem", 5, 0, 3), 1 << 20).empty());
  auto over = c.hand_over("a", shard("v2", 5, 0, 3), 1 << 20);
  CHECK(over.find("over its budget of 2 MiB") != std::string::npos);
  CHECK(c.memory->get(real));  // the real hand-overs stay
  CHECK(c.memory->handed_over_bytes("a") == (std::int64_t{2} << 20));

  train::memory_shards memory;
  CHECK(memory.hold_from("b", shard("mem", 4, 3, 6), std::vector<std::byte>(100), 1000, 150).empty());
  CHECK(memory.hold_from("d", shard("mem", 4, 0, 3), std::vector<std::byte>(100), 1000, 150)
          .find("--max-held-state") != std::string::npos);
  memory.put(shard("mem", 4, 0, 3), std::vector<std::byte>(100));  // the node's own: not counted
  CHECK(memory.handed_over_bytes() == 100);
}

}  // namespace shard_access_test
