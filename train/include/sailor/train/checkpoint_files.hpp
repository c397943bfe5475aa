#pragma once
// How a checkpoint folder is laid out (no LibTorch; namespace detail: shared by the index in
// sailor_train_state, the supervisor's holdings in sailor_actors and the reader and writer in
// sailor_train, not an API for users).
//
// checkpoint_path(dir, n) = dir/iter-<n, 8 digits>/ holds one file per writer (a rank of
// replica 0), named
//
//   shard-<group>-w<writer>-of-<writers>-layers-<first>-<end>-tp<rank>-of-<size>.ckpt
//
// where <group> is a hash of the writing plan's layout (layer range and TP degree of replica
// 0 of every stage) and <writers> the number of files that layout writes. Each file is
// written under a temporary name (starting with '.') and renamed into place when complete,
// so a folder is complete when, for one group, every writer 0..writers-1 has its file. The
// names carry everything the completeness test needs: writers never share a file, so there is
// no race between processes, and files left by a plan that crashed mid-checkpoint (another
// group) are ignored.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sailor::train::detail {

struct shard_file {
  std::string group;  // 16 hex digits
  int writer = 0, writers = 0;
  int first_layer = 0, end_layer = 0;  // [first, end)
  int tp_rank = 0, tp_size = 1;
  std::string path;  // set by list_shards

  bool holds_layer(int layer) const { return first_layer <= layer && layer < end_layer; }
};

/// The n of a folder named iter-<n> (checkpoint_path); -1 for any other name.
int iterations_of_folder(const std::string& name);

/// The file name (no folder) of `f`.
std::string shard_file_name(const shard_file& f);
/// Parses a file name written by shard_file_name; nullopt for anything else (temporary files).
std::optional<shard_file> parse_shard_file_name(const std::string& name);
/// A stable hash (16 hex digits) of `text`.
std::string layout_hash(const std::string& text);

/// What a checkpoint folder holds.
struct folder_state {
  bool exists = false;
  /// The files of a complete group, sorted by writer (empty when none is complete).
  std::vector<shard_file> complete;
  /// For a message when incomplete: the most files any group has and how many it needs.
  int best_found = 0, best_needed = 0;
};
folder_state inspect_folder(const std::string& folder);
/// The same test over `files` (wherever they are: a folder, memory, or both): the files of the
/// first complete group in name order, by writer.
folder_state complete_group(const std::vector<shard_file>& files);

/// The plans' checkpoint folders under a job's folder `job_dir` (its subfolders named v<N>).
std::vector<std::string> plan_folders(const std::string& job_dir);

/// The iteration counts of the checkpoint folders under `dir`, ascending.
std::vector<int> checkpoint_iterations(const std::string& dir);

/// CRC-32 of `bytes` at `data`, continuing `crc` (0 to start): the checksum of each tensor.
std::uint32_t checkpoint_crc(std::uint32_t crc, const void* data, std::uint64_t bytes);

/// Random access to one shard's bytes, wherever they are: a file in a state folder, or the
/// buffers a fetch received from a holder's memory (recovery from the survivors' memory:
/// such bytes are read straight into the rank's tensors, never written to a file).
class shard_bytes {
public:
  virtual ~shard_bytes() = default;
  /// The file's path or the shard's path: what messages call it.
  virtual const std::string& name() const = 0;
  virtual std::uint64_t size() const = 0;
  /// Copies bytes [offset, offset + n) to `dest`; false when they are not all there.
  virtual bool read(std::uint64_t offset, void* dest, std::uint64_t n) = 0;
  /// checkpoint_crc of bytes [offset, offset + n) continuing `crc`; nullopt when they are not
  /// all there. By default through read(); memory computes it in place.
  virtual std::optional<std::uint32_t> crc(std::uint32_t crc, std::uint64_t offset,
                                           std::uint64_t n);
};

/// The shard file at `path`; null when it cannot be opened.
std::unique_ptr<shard_bytes> open_shard_file(const std::string& path);
/// A shard in memory as `parts` back to back (not copied: the caller keeps them alive).
std::unique_ptr<shard_bytes> shard_in_memory(std::string name,
                                             std::vector<std::span<const std::byte>> parts);

/// Reads the whole shard file at `path` and checks its header and every tensor's checksum;
/// the reason (naming the file) when it is truncated, padded or corrupt.
std::optional<std::string> verify_shard(const std::string& path);
/// The same check of a shard wherever it is.
std::optional<std::string> verify_shard(shard_bytes& shard);

/// Keeps the newest `keep` complete checkpoints under `dir` and removes every checkpoint
/// folder older than the oldest of them (best effort; never a complete one among the newest
/// `keep`, never a folder newer than it: such a folder may still be being written).
void prune_checkpoints(const std::string& dir, int keep);

/// Keeps this writer's files (named after `mine`) in the newest `keep` folders under `dir`
/// that hold one, and removes its older ones (and folders left empty). Nodes keep only their
/// own shards, so this is what bounds a node's state folder; a checkpoint stays complete as
/// long as every writer keeps it (writers write in order, one write in flight each). A folder
/// for which `pinned` (may be empty) says true is kept whatever its age: a plan about to
/// start was told to restore it.
void prune_writer_files(const std::string& dir, const shard_file& mine, int keep,
                        const std::function<bool(const std::string& folder)>& pinned = {});

}  // namespace sailor::train::detail
