#pragma once
/// Plan-independent training checkpoints: the index (no LibTorch here).
///
/// A checkpoint taken after n completed iterations lives in `checkpoint_path(dir, n)`. Every
/// rank of replica 0 of every stage writes its shard of the parameters and of the optimizer
/// state there (asynchronously, after the optimizer step), keyed by layer and parameter name
/// with the TP degree and rank it was cut for; a rank of any other plan (other stages, TP
/// degrees or replica counts) assembles the slices it holds from them
/// (`stage_executor::restore`). A checkpoint is complete once every writer's file is in
/// place (each is renamed into place only after it is fully written), so a rank killed while
/// writing leaves an incomplete checkpoint that `latest_checkpoint` skips.

#include <optional>
#include <string>
#include <vector>

namespace sailor::train {

/// The folder of the checkpoint taken after `iterations` completed iterations.
std::string checkpoint_path(const std::string& dir, int iterations);

/// The largest n for which `dir` holds a complete checkpoint taken after n iterations; 0 when
/// it holds none (or does not exist).
int latest_checkpoint(const std::string& dir);

/// Like latest_checkpoint, but only a checkpoint whose every file verifies (its header and
/// each tensor's checksum); a newer one that does not is skipped with a warning that names
/// the file, so a re-plan falls back to the previous complete checkpoint.
int latest_verified_checkpoint(const std::string& dir);

/// Why the shard file at `path` does not verify (bad magic, truncated, a tensor's CRC-32),
/// or nothing when it does. A node checks its shards before it reports them.
std::optional<std::string> verify_checkpoint_shard(const std::string& path);

/// Removes the plans' checkpoint folders under `job_dir` (its subfolders named v<N>) that are
/// not in `keep` (paths compared lexically normal), with what they hold; best effort. Returns
/// the folders removed. What bounds a node's state folder across re-plans: each plan writes a
/// folder of its own, and the supervisor names the ones a plan may still restore from.
std::vector<std::string> remove_plan_folders(const std::string& job_dir,
                                             const std::vector<std::string>& keep);

}  // namespace sailor::train
