// The checkpoint folders a node's writers keep whatever their count (node_training/
// checkpoint_pins.hpp): the one a plan restores, and the newest checkpoint complete across
// stages with every newer iteration of its plan folder.
#include "node_training/checkpoint_pins.hpp"

#include <doctest/doctest.h>

#include <filesystem>

#include "sailor/train/checkpoint.hpp"

using sailor::train::checkpoint_path;
using sailor::train::checkpoint_pins;

namespace {

std::string folder(const std::string& dir, int n) {
  return std::filesystem::path{checkpoint_path(dir, n)}.lexically_normal().string();
}

}  // namespace

TEST_CASE("checkpoint pins: the newest complete checkpoint and every newer one of its plan folder") {
  checkpoint_pins pins;
  const std::string v3 = "/state/checkpoints/job/v3";
  CHECK_FALSE(pins.keeps(folder(v3, 6)));  // nothing told yet: the writers' count decides
  pins.kept(3, 6, v3 + "/");               // a trailing separator names the same folder
  CHECK_FALSE(pins.keeps(folder(v3, 4)));
  CHECK(pins.keeps(folder(v3, 6)));
  CHECK(pins.keeps(folder(v3, 8)));
  CHECK_FALSE(pins.keeps(folder("/state/checkpoints/job/v2", 8)));   // another plan's folder
  CHECK_FALSE(pins.keeps(folder("/state/checkpoints/job/v30", 8)));  // not a prefix match

  pins.kept(3, 4, v3);  // late, and older: ignored
  CHECK_FALSE(pins.keeps(folder(v3, 4)));
  pins.kept(3, 8, v3);  // it advanced: 6 may go
  CHECK_FALSE(pins.keeps(folder(v3, 6)));
  CHECK(pins.keeps(folder(v3, 8)));

  pins.kept(2, 10, "/state/checkpoints/job/v2");  // an older plan's, arriving late: ignored
  CHECK(pins.keeps(folder(v3, 8)));
  const std::string v4 = "/state/checkpoints/job/v4";
  pins.kept(4, 2, v4);  // the next plan's first
  CHECK(pins.keeps(folder(v4, 2)));
  CHECK_FALSE(pins.keeps(folder(v3, 8)));
}

TEST_CASE("checkpoint pins: the restored checkpoint is kept beside the complete one") {
  checkpoint_pins pins;
  pins.restore = folder("/state/checkpoints/job/mem", 5);
  CHECK(pins.keeps(folder("/state/checkpoints/job/mem", 5)));
  CHECK_FALSE(pins.keeps(folder("/state/checkpoints/job/mem", 6)));
  pins.kept(4, 6, "/state/checkpoints/job/v4");
  CHECK(pins.keeps(folder("/state/checkpoints/job/mem", 5)));
  CHECK(pins.keeps(folder("/state/checkpoints/job/v4", 6)));
}
