// The supervisor's view of which node holds which checkpoint shard (no disk, no network).
#include "sailor/actors/checkpoint_holdings.hpp"

#include <doctest/doctest.h>

#include "sailor/train/checkpoint_files.hpp"
#include "test_shard_paths.hpp"

using namespace sailor;

namespace {

std::string shard(const std::string& folder, int iterations, int writer, int writers) {
  return testing::shard_path(folder, iterations, writer, writers);
}

}  // namespace

TEST_CASE("holdings: the newest checkpoint whose every writer's file is held wins") {
  actors::checkpoint_holdings held;
  held.add(shard("checkpoints/v1", 4, 0, 2), "10.0.0.1:7000");
  held.add(shard("checkpoints/v1", 4, 1, 2), "10.0.0.2:7000");
  held.add(shard("checkpoints/v1", 6, 0, 2), "10.0.0.1:7000");  // writer 1 of 6 not yet
  auto best = held.newest();
  CHECK(best.iterations == 4);
  CHECK(best.folder == "checkpoints/v1");
  REQUIRE(best.files.size() == 2);
  CHECK(best.files[0] == shard("checkpoints/v1", 4, 0, 2));
  CHECK(best.holders[1] == "10.0.0.2:7000");
  held.add(shard("checkpoints/v1", 6, 1, 2), "10.0.0.2:7000");
  CHECK(held.newest().iterations == 6);
}

TEST_CASE("holdings: a lost node takes its files, an older complete checkpoint remains") {
  actors::checkpoint_holdings held;
  held.add(shard("checkpoints/v2", 2, 0, 1), "a:1");
  held.add(shard("checkpoints/v2", 2, 0, 1), "b:1");  // fetched by b after a re-plan
  held.add(shard("checkpoints/v2", 4, 0, 1), "a:1");
  held.forget("a:1");
  auto best = held.newest();
  CHECK(best.iterations == 2);
  REQUIRE(best.holders.size() == 1);
  CHECK(best.holders[0] == "b:1");
  held.forget("b:1");
  CHECK(held.newest().iterations == 0);
  CHECK(held.files() == 0);
}

TEST_CASE("holdings: paths that are not shard files are ignored") {
  actors::checkpoint_holdings held;
  held.add("checkpoints/v1/iter-00000004/notes.txt", "a:1");
  held.add("checkpoints/v1/latest/" + train::detail::shard_file_name({}), "a:1");
  held.add(shard("checkpoints/v1", 4, 0, 1), "");
  CHECK(held.files() == 0);
}

TEST_CASE("holdings: only the job's own folders count when a prefix is given") {
  actors::checkpoint_holdings held;
  held.add(shard("checkpoints/other-job/v1", 8, 0, 1), "a:1");
  held.add(shard("checkpoints/my-job/v2", 4, 0, 1), "a:1");
  CHECK(held.newest().iterations == 8);
  auto mine = held.newest("checkpoints/my-job/");
  CHECK(mine.iterations == 4);
  CHECK(mine.folder == "checkpoints/my-job/v2");
  CHECK(held.newest("checkpoints/third/").iterations == 0);
}

TEST_CASE("holdings: bounded to the newest complete checkpoints, the folders still needed, and never a bad one again") {
  actors::checkpoint_holdings held;
  for (int it = 1; it <= 50; ++it)
    held.add(shard("checkpoints/j/v1", it, 0, 1), "a:1");
  held.add(shard("checkpoints/j/v2", 51, 0, 2), "a:1");  // being written
  held.keep_newest(2);
  CHECK(held.files() == 3);
  CHECK(held.newest().iterations == 50);
  CHECK(held.newest("", 50).iterations == 49);
  held.mark_bad("checkpoints/j/v1", 50);
  CHECK(held.newest().iterations == 49);
  held.add(shard("checkpoints/j/v1", 50, 0, 1), "b:1");  // reported again: still bad
  CHECK(held.newest().iterations == 49);
  held.add(shard("checkpoints/old/v9", 60, 0, 1), "a:1");
  held.retain_folders({"checkpoints/j/v1", "checkpoints/j/v2"});
  CHECK(held.newest().iterations == 49);
  CHECK(held.newest("checkpoints/old/").iterations == 0);
}

TEST_CASE("holdings: the survivors' memory wins over a disk checkpoint of the same iteration, and a disk one stands in where no survivor holds every layer") {
  actors::checkpoint_holdings held;
  // A plan wrote its checkpoint after 5 iterations on disk (replica 0 of each stage).
  held.add(shard("checkpoints/j/v1", 5, 0, 2), "10.0.0.1:7000");
  held.add(shard("checkpoints/j/v1", 5, 1, 2), "10.0.0.2:7000");
  // Its ranks kept their state after 5 in memory: replicas of stage 0 on two nodes, stage 1
  // on one.
  held.add(shard("checkpoints/j/mem", 5, 0, 2), "10.0.0.1:7000");
  held.add(shard("checkpoints/j/mem", 5, 0, 2), "10.0.0.3:7000");
  held.add(shard("checkpoints/j/mem", 5, 1, 2), "10.0.0.4:7000");
  auto best = held.newest("checkpoints/j/");
  CHECK(best.iterations == 5);
  CHECK(best.folder == "checkpoints/j/mem");
  // Every holder of a layer shard is listed (several survivors to fetch it from).
  REQUIRE(best.files.size() == 3);
  CHECK(best.holders[0] == "10.0.0.1:7000");
  CHECK(best.holders[1] == "10.0.0.3:7000");
  // The only holder of stage 1's state is lost: the disk checkpoint stands in for its layers
  // (memory still for stage 0's: mixed).
  held.forget("10.0.0.4:7000");
  best = held.newest("checkpoints/j/");
  CHECK(best.iterations == 5);
  CHECK(best.folder == "checkpoints/j/mem");
  CHECK(best.mixed);
  CHECK(best.other_folder == "checkpoints/j/v1");
  CHECK(best.files.back() == shard("checkpoints/j/v1", 5, 1, 2));
  // A newer state in memory that is complete wins over an older disk checkpoint.
  held.add(shard("checkpoints/j/mem", 7, 0, 2), "10.0.0.1:7000");
  held.add(shard("checkpoints/j/mem", 7, 1, 2), "10.0.0.2:7000");
  CHECK(held.newest("checkpoints/j/").iterations == 7);
  CHECK(held.newest("checkpoints/j/").folder == "checkpoints/j/mem");
}

TEST_CASE("holdings: memory for the layers survivors hold and the checkpoint of the same iteration for the others (mixed)") {
  actors::checkpoint_holdings held;
  // The plan's checkpoint after 4 iterations: both writers on disk. The survivors' memory
  // after 4 holds writer 0's layers only (writer 1's ranks are gone).
  held.add(shard("checkpoints/j/v1", 4, 0, 2), "n1:7000");
  held.add(shard("checkpoints/j/v1", 4, 1, 2), "n2:7000");
  held.add(shard("checkpoints/j/mem", 4, 0, 2), "n3:7000");
  auto best = held.newest("checkpoints/j/");
  CHECK(best.iterations == 4);
  CHECK(best.mixed);
  CHECK(best.folder == "checkpoints/j/mem");
  CHECK(best.other_folder == "checkpoints/j/v1");
  CHECK(best.files == std::vector<std::string>{shard("checkpoints/j/mem", 4, 0, 2),
                                               shard("checkpoints/j/v1", 4, 1, 2)});
  CHECK(best.holders == std::vector<std::string>{"n3:7000", "n2:7000"});
  // Once memory holds every layer, memory alone.
  held.add(shard("checkpoints/j/mem", 4, 1, 2), "n4:7000");
  best = held.newest("checkpoints/j/");
  CHECK_FALSE(best.mixed);
  CHECK(best.folder == "checkpoints/j/mem");
  CHECK(best.files.size() == 2);
  // Memory of a newer iteration that the disk does not complete: not mixed with another
  // iteration's checkpoint; the newest complete state wins.
  held.add(shard("checkpoints/j/mem", 5, 0, 2), "n3:7000");
  held.add(shard("checkpoints/j/v1", 6, 1, 2), "n2:7000");
  best = held.newest("checkpoints/j/");
  CHECK(best.iterations == 4);
  CHECK_FALSE(best.mixed);
  // Without memory of it, the checkpoint alone.
  held.forget("n3:7000");
  held.forget("n4:7000");
  best = held.newest("checkpoints/j/");
  CHECK(best.iterations == 4);
  CHECK_FALSE(best.mixed);
  CHECK(best.folder == "checkpoints/j/v1");
}

TEST_CASE("holdings: where a restore takes its state, in the words of the recovery record") {
  CHECK(actors::state_source(0, "", {}) == "none");
  const std::string mem = "checkpoints/job/mem";
  CHECK(actors::state_source(4, mem, {mem + "/iter-00000004/a.ckpt"}) == "replicas");
  CHECK(actors::state_source(4, mem, {mem + "/iter-00000004/a.ckpt",
                                      "checkpoints/job/v1/iter-00000004/b.ckpt"}) == "mixed");
  CHECK(actors::state_source(4, "checkpoints/job/v1", {"checkpoints/job/v1/iter-00000004/b.ckpt"}) ==
        "checkpoint");
  CHECK(actors::state_source_words("replicas") == "the survivors' memory");
  CHECK(actors::state_source_words("checkpoint") == "the checkpoint");
}

TEST_CASE("holdings: the newest complete checkpoints are kept, and the pinned one with every newer") {
  actors::checkpoint_holdings held;
  for (int n : {2, 4, 6, 8})
    for (int w : {0, 1})
      held.add(shard("checkpoints/j/v1", n, w, 2), "h" + std::to_string(w));
  held.keep_newest(2, 4);
  CHECK(held.newest("checkpoints/j/v1", 6).iterations == 4);  // pinned: not forgotten
  held.keep_newest(2);
  CHECK(held.newest("checkpoints/j/v1", 6).iterations == 0);  // older than the newest 2
  CHECK(held.newest().iterations == 8);
}
