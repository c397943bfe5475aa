// Recovery from the survivors' memory without a disk (issue 12): a rank's state after its
// last completed iteration, kept in the memory of two holders and served by their shard
// servers, is fetched into memory (in parts from both when it is large) and restored straight
// from the received buffers into another rank's tensors. No file is written or read: the
// restored state is byte for byte the holder's, and training goes on with the loss curve of
// the uninterrupted run, also in another plan (other stage boundaries). Ranks run as threads
// of this process; the shard servers speak comm's TCP transport on loopback.

#if __has_include(<sailor/models/shapes.hpp>) && defined(SAILOR_WITH_TRAIN)

#include <sailor/train/executor.hpp>
#include <sailor/train/shard_service.hpp>
#include <sailor/models/shapes.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "rank_threads.hpp"
#include "loopback_tcp.hpp"
#include "temp_file.hpp"
#include "tiny_plans.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_memory_restore {

namespace {

using namespace sailor;
using namespace std::chrono_literals;
using sailor::testing::make_plan;
using sailor::testing::stage;
namespace fs = std::filesystem;

std::unique_ptr<comm::transport> tcp(const std::string& name) {
  return sailor::testing::loopback_tcp(name, "memory-restore-test-token-0123456789");
}

// Trains `plan` from scratch for `iterations`; every rank's state after them (as it keeps it
// in memory) and rank 0's losses.
struct trained {
  std::vector<train::state_shard> shards;
  std::vector<double> losses;
};

trained train_plan(const config::plan& plan, int iterations) {
  const auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  trained out;
  out.shards.resize(static_cast<std::size_t>(train::world_size(plan)));
  auto errors = sailor::testing::run_rank_threads(
    models::tiny_gpt_shape(), plan, options, [&](int r, train::stage_executor& exec) -> std::string {
      for (int it = 0; it < iterations; ++it) {
        auto tel = exec.run_iteration(it);
        if (!tel)
          return tel.error().to_string();
        if (r == 0)
          out.losses.push_back(tel->loss);
      }
      auto shard = exec.state_snapshot(iterations);
      if (!shard)
        return shard.error().to_string();
      out.shards[static_cast<std::size_t>(r)] = std::move(*shard);
      return {};
    });
  for (const auto& e : errors)
    CHECK_MESSAGE(e.empty(), e);
  return out;
}

std::vector<std::span<const std::byte>> spans_of(const std::vector<train::received_shard>& got,
                                                 const std::string& path) {
  for (const auto& r : got)
    if (r.path == path)
      return r.spans();
  FAIL("no shard " << path << " was received");
  return {};
}

bool files_under(const fs::path& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator i{dir, ec}, end; !ec && i != end; i.increment(ec))
    if (i->is_regular_file())
      return true;
  return false;
}

}  // namespace

TEST_CASE("memory restore: the survivors' state goes from two holders' memory into a new rank's tensors, byte for byte, no file written") {
  testing::temp_dir dir;
  const int done = 3;
  const auto single = make_plan({stage(0, 6, {1})});
  auto before = train_plan(single, done);
  REQUIRE(before.shards.size() == 1);
  const auto& kept = before.shards[0];
  const std::string path = "checkpoints/job/mem/iter-00000003/" + kept.name;

  // Two holders of the state (two replicas of its stage), each serving it from memory.
  auto fetcher = tcp("fetcher");
  auto holder_a = tcp("holder-a");
  auto holder_b = tcp("holder-b");
  auto memory_a = std::make_shared<train::memory_shards>();
  auto memory_b = std::make_shared<train::memory_shards>();
  memory_a->put(path, kept.bytes);
  memory_b->put(path, kept.bytes);
  auto a = train::shard_server::start(*holder_a, "127.0.0.1", dir.path("a"), memory_a);
  auto b = train::shard_server::start(*holder_b, "127.0.0.1", dir.path("b"), memory_b);
  REQUIRE(a);
  REQUIRE(b);
  std::int64_t fetched = 0;
  auto got = train::fetch_into_memory(*fetcher, {{path, (*a)->address()}, {path, (*b)->address()}},
                                      10s, &fetched);
  REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
  REQUIRE(got->size() == 1);
  CHECK(fetched == static_cast<std::int64_t>(kept.bytes.size()));
  CHECK((*got)[0].size() == static_cast<std::int64_t>(kept.bytes.size()));

  // A rank of the same layout restores from the received buffers, the whole buffer and the
  // same bytes cut into uneven parts (as several holders' ranges arrive): its state, encoded
  // again, is the holder's byte for byte.
  const auto received = spans_of(*got, path);
  const std::span<const std::byte> whole{kept.bytes};
  const std::size_t cut1 = 12345, cut2 = kept.bytes.size() / 2 + 7;
  const std::vector<std::vector<std::span<const std::byte>>> layouts = {
    received, {whole.subspan(0, cut1), whole.subspan(cut1, cut2 - cut1), whole.subspan(cut2)}};
  const auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  for (const auto& parts : layouts) {
    std::vector<std::byte> again;
    auto errors = sailor::testing::run_rank_threads(
      models::tiny_gpt_shape(), single, options, [&](int, train::stage_executor& exec) -> std::string {
        if (auto st = exec.restore(std::vector<train::shard_input>{{path, "", parts}}, done))
          return st->to_string();
        auto shard = exec.state_snapshot(done);
        if (!shard)
          return shard.error().to_string();
        again = std::move(shard->bytes);
        return {};
      });
    REQUIRE_MESSAGE(errors[0].empty(), errors[0]);
    CHECK(again == kept.bytes);
  }
  // Nothing went through a state folder on either side.
  CHECK_FALSE(files_under(dir.root()));
}

TEST_CASE("memory restore: another plan resumes from the received state with the uninterrupted loss curve") {
  const int done = 3, total = 6;
  const auto single = make_plan({stage(0, 6, {1})});
  auto reference = train_plan(single, total).losses;
  REQUIRE(reference.size() == static_cast<std::size_t>(total));
  // A PP=2 plan ran 3 iterations; its two ranks keep their state (two shards, two writers).
  auto before = train_plan(make_plan({stage(0, 3, {1}), stage(3, 3, {1})}), done);
  REQUIRE(before.shards.size() == 2);
  std::vector<train::shard_input> inputs;
  for (const auto& s : before.shards)
    inputs.push_back({"checkpoints/job/mem/iter-00000003/" + s.name, "", {std::span<const std::byte>{s.bytes}}});
  // A TP=2 plan of one stage takes both shards, re-sliced; a shard missing is refused.
  const auto tp2 = make_plan({stage(0, 6, {2})});
  const auto options = sailor::testing::options_for(train::optimizer_kind::adamw);
  std::vector<double> losses;
  auto errors = sailor::testing::run_rank_threads(
    models::tiny_gpt_shape(), tp2, options, [&](int r, train::stage_executor& exec) -> std::string {
      if (!exec.restore(std::vector<train::shard_input>{inputs[0]}, done))
        return "a restore from half the layers was accepted";
      if (auto st = exec.restore(inputs, done))
        return st->to_string();
      for (int it = done; it < total; ++it) {
        auto tel = exec.run_iteration(it);
        if (!tel)
          return tel.error().to_string();
        if (r == 0)
          losses.push_back(tel->loss);
      }
      return {};
    });
  for (const auto& e : errors)
    CHECK_MESSAGE(e.empty(), e);
  REQUIRE(losses.size() == static_cast<std::size_t>(total - done));
  for (int it = done; it < total; ++it) {
    const double want = reference[static_cast<std::size_t>(it)];
    CHECK_MESSAGE(std::abs(losses[static_cast<std::size_t>(it - done)] - want) / std::abs(want) < 1e-4,
                  "iteration " << it);
  }
}

TEST_CASE("memory restore: a fetch from a holder that never answers ends at once when it is cancelled (the rank's plan was released)") {
  // A holder whose transport completes the handshake (the job token) and then says nothing:
  // gone silent. The fetch's bound is 30 s; only the cancel can end it sooner.
  auto fetcher = tcp("fetcher");
  auto silent = tcp("silent-holder");
  auto listening = silent->listen(comm::address{"127.0.0.1", 0},
                                  [](const comm::connection_ptr&) { return comm::connection_handlers{}; });
  REQUIRE(listening);
  const std::string holder = (*listening)->local_address().to_string();
  const std::string path = "checkpoints/job/mem/iter-00000003/shard.bin";
  train::fetch_cancel cancel;
  auto fetch = std::async(std::launch::async, [&] {
    return train::fetch_into_memory(*fetcher, {{path, holder}}, 30s, nullptr, &cancel);
  });
  REQUIRE(fetch.wait_for(300ms) == std::future_status::timeout);  // a bounded look: waiting
  const auto start = std::chrono::steady_clock::now();
  cancel.cancel("plan v3 was released");
  REQUIRE(fetch.wait_for(2s) == std::future_status::ready);
  auto got = fetch.get();
  REQUIRE(!got);
  CHECK(got.error().message.find("cancelled: plan v3 was released") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  // A fetch given a cancelled token fails before it asks anyone.
  auto later = train::fetch_into_memory(*fetcher, {{path, holder}}, 30s, nullptr, &cancel);
  REQUIRE(!later);
  CHECK(later.error().message.find("cancelled") != std::string::npos);
}

}  // namespace integration_memory_restore
#endif
