#pragma once
// Which checkpoint folders a node's writers must keep whatever their count (train_options::
// keep_checkpoint). Private to the node trainer (node_training.cpp); no LibTorch here.
//
// Two pins: the checkpoint the newest job restores, and the newest checkpoint of the running
// plan complete across its stages (checkpoint_kept, from the supervisor) with every newer
// iteration of its folder. The second is what a whole stage lost without notice resumes from;
// the copies of the other stages' shards lag a checkpoint or two behind, so a writer counting
// only its own shards could prune it.

#include <cstdint>
#include <filesystem>
#include <string>

#include "sailor/train/checkpoint_files.hpp"

namespace sailor::train {

struct checkpoint_pins {
  std::string restore;          // checkpoint_path of the restored checkpoint, lexically normal
  std::string complete_folder;  // the plan folder of the newest complete checkpoint, normal
  std::int64_t complete_plan = 0;
  int complete_iterations = 0;  // 0: none told

  // Takes the newest complete checkpoint `folder` (this node's path of it) after `iterations`
  // of plan `plan_version`; an older plan's or iteration's, arriving late, is ignored.
  void kept(std::int64_t plan_version, int iterations, const std::string& folder) {
    if (plan_version < complete_plan ||
        (plan_version == complete_plan && iterations <= complete_iterations))
      return;
    complete_plan = plan_version;
    complete_iterations = iterations;
    auto normal = std::filesystem::path{folder}.lexically_normal();
    if (!normal.has_filename())  // a trailing separator
      normal = normal.parent_path();
    complete_folder = normal.string();
  }

  // Whether a writer keeps `folder` (checkpoint_path of some iteration, lexically normal).
  bool keeps(const std::string& folder) const {
    if (!restore.empty() && folder == restore)
      return true;
    if (complete_iterations <= 0)
      return false;
    const std::filesystem::path p{folder};
    return p.parent_path().string() == complete_folder &&
           detail::iterations_of_folder(p.filename().string()) >= complete_iterations;
  }
};

}  // namespace sailor::train
