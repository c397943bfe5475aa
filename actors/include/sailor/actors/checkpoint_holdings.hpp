#pragma once
/// Which node holds which checkpoint shard: the supervisor's view of the job's state, built
/// from the ranks' reports, never from a disk (nodes share none).
///
/// A writer rank reports each shard file once it is in place (train_report::checkpoint_file,
/// a path relative to the node's state folder, such as
/// checkpoints/v3/iter-00000004/shard-...ckpt, and checkpoint_holder, the address of the
/// node's shard server). A checkpoint (a folder and an iteration) is complete when, for one
/// writing layout, every writer's file is held by a node still in the job. A node that is
/// lost takes its files with it; a writer's copies of its shards on a node outside its stage
/// (reported by that node, phase "copy") keep them held.
/// No LibTorch here.

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sailor::actors {

/// A complete checkpoint and where its files are.
struct held_checkpoint {
  int iterations = 0;        ///< completed iterations it holds (0: none)
  std::string folder;        ///< relative to the state folders, e.g. checkpoints/v3
  std::vector<std::string> files;    ///< relative paths
  std::vector<std::string> holders;  ///< one per file: a shard server's host:port
  /// Mixed: `folder` (the survivors' memory) holds some of its layers and `other_folder`, the
  /// on-disk checkpoint of the same iteration, the others; `files` lists each from where.
  bool mixed = false;
  std::string other_folder;
};

/// Where a plan's restore takes its state, as recovery records and summaries name it:
/// "none" (`start_iteration` 0: it starts from scratch), "replicas" (the survivors' memory,
/// a `restore_dir` checkpoints/<job>/mem), "mixed" (that memory for some layers, files of
/// `restore_files` outside it for the others) or "checkpoint" (a checkpoint on disk, or the
/// copies of its shards other nodes keep).
std::string state_source(int start_iteration, const std::string& restore_dir,
                         const std::vector<std::string>& restore_files);

/// `state_source`'s value in words, for messages: "the survivors' memory", "the checkpoint",
/// "the survivors' memory and the checkpoint", "nothing".
std::string state_source_words(const std::string& source);

class checkpoint_holdings {
public:
  /// Records that `holder` has `file`; ignores paths that are not shard files.
  void add(const std::string& file, const std::string& holder);
  /// Forgets everything `holder` had (its node is gone).
  void forget(const std::string& holder);
  /// The complete checkpoint after the most iterations among folders under `under` (a job's
  /// own, e.g. checkpoints/<job>/; empty: any) and before `below` iterations (0: no bound);
  /// iterations 0 when none. Of one iteration, the survivors' memory when it holds every
  /// layer, else memory with a checkpoint on disk of the same iteration for the layers memory
  /// lacks (mixed), else a checkpoint on disk.
  held_checkpoint newest(const std::string& under = {}, int below = 0) const;
  /// Keeps only checkpoints at least as new as `iterations` of any folder (bounded memory).
  void prune_older_than(int iterations);
  /// Keeps the newest `keep` complete checkpoints and everything newer (being written), and
  /// everything from `pinned` iterations on (0: nothing more; the writers keep that one, see
  /// checkpoint_kept), and forgets the older ones: the writers keep no more on their disks.
  void keep_newest(int keep, int pinned = 0);
  /// Forgets every checkpoint outside `folders` (those no plan restores from any more).
  void retain_folders(const std::set<std::string>& folders);
  /// Forgets checkpoint `iterations` of `folder` for good (a restore of it failed: a shard is
  /// corrupt or gone); later reports of its files are ignored.
  void mark_bad(const std::string& folder, int iterations);
  std::size_t files() const;

private:
  struct key {
    std::string folder;
    int iterations = 0;
    bool operator<(const key& o) const {
      return iterations != o.iterations ? iterations < o.iterations : folder < o.folder;
    }
  };
  using files_held = std::map<std::string, std::set<std::string>>;  // file name -> holders
  /// The files of one complete writing layout of `c` (by writer), empty when none is.
  static std::map<int, std::string> complete_files(const files_held& c);
  /// Checkpoint `iterations` from `first` (in `folder`), completed with files of `rest`
  /// (another folder of the same iteration) where given; iterations 0 when incomplete.
  static held_checkpoint assemble(int iterations, const std::string& folder,
                                  const files_held& first,
                                  std::pair<std::string, const files_held*> rest);
  std::map<key, files_held> held_;
  std::set<key> bad_;  // bounded: one per failed restore
};

}  // namespace sailor::actors
