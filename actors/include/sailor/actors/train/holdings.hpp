#pragma once
/// Which node holds which checkpoint shard: the supervisor's view of the job's state, built
/// from the ranks' reports, never from a disk (nodes share none).
///
/// A writer rank reports each shard file once it is in place (train_report::checkpoint_file,
/// a path relative to the node's state folder, such as
/// checkpoints/v3/iter-00000004/shard-...ckpt, and checkpoint_holder, the address of the
/// node's shard server). A checkpoint (a folder and an iteration) is complete when, for one
/// writing layout, every writer's file is held by a node still in the job. A node that is
/// lost takes its files with it.
/// No LibTorch here.

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sailor::actors {

/// A complete checkpoint and where its files are.
struct held_checkpoint {
  int iterations = 0;        ///< completed iterations it holds (0: none)
  std::string folder;        ///< relative to the state folders, e.g. checkpoints/v3
  std::vector<std::string> files;    ///< relative paths
  std::vector<std::string> holders;  ///< one per file: a shard server's host:port
};

class checkpoint_holdings {
public:
  /// Records that `holder` has `file`; ignores paths that are not shard files.
  void add(const std::string& file, const std::string& holder);
  /// Forgets everything `holder` had (its node is gone).
  void forget(const std::string& holder);
  /// The complete checkpoint after the most iterations among folders under `under` (a job's
  /// own, e.g. checkpoints/<job>/; empty: any); iterations 0 when none.
  held_checkpoint newest(const std::string& under = {}) const;
  /// Keeps only checkpoints at least as new as `iterations` of any folder (bounded memory).
  void prune_older_than(int iterations);
  std::size_t files() const;

private:
  struct key {
    std::string folder;
    int iterations = 0;
    bool operator<(const key& o) const {
      return iterations != o.iterations ? iterations < o.iterations : folder < o.folder;
    }
  };
  // checkpoint -> file name -> holders
  std::map<key, std::map<std::string, std::set<std::string>>> held_;
};

}  // namespace sailor::actors
