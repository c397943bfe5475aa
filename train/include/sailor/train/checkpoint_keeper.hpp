#pragma once
/// The coordinator's copy of the job's checkpoints: a checkpoint that outlives every node.
///
/// Nodes keep the shards their ranks write in their own state folders, and each writer copies
/// its shards to the memory of a node of another stage (a whole stage lost keeps its
/// checkpoint). Spot capacity, though, can vanish all at once: a zone's every instance taken,
/// or every zone empty for hours (the AWS traces in shared/data/spot-traces go to zero
/// hundreds of times). With every node gone, every copy is gone too, and a job resumed on new
/// nodes would start over from iteration 0. The keeper runs where the job's control runs (the
/// coordinator, which does not sit on spot capacity): each shard file a writer reports is
/// fetched from its holder into the keeper's own state folder, off the caller's thread, and
/// served to the ranks of later plans by the keeper's own shard server, like any node's.
///
///   supervisor (a writer reported a file)     keeper thread                holder's server
///   keep(file, holder) -- queued ----------->  fetch_shards ------------->  "get <file>"
///                                              <state>/<file>, atomically <-- the bytes
///   <- on_kept(file, keeper address) --------  then prunes its folders
///
/// It keeps, per job, the newest `keep` complete checkpoints of the two newest plan folders
/// that hold one (and anything newer still arriving); older plan folders go. No LibTorch here.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "sailor/comm/transport.hpp"
#include "sailor/config/error.hpp"
#include "sailor/train/request_worker.hpp"

namespace sailor::train {

class shard_server;

struct checkpoint_keeper_options {
  std::string state_dir;  ///< the keeper's own folder (it serves <state_dir>/checkpoints)
  std::string host;       ///< where nodes reach its shard server (not a wildcard address)
  std::chrono::milliseconds timeout{30000};  ///< bound on each fetch
  int keep = 3;           ///< complete checkpoints kept per plan folder
  std::size_t max_pending = 64;  ///< queued fetches; beyond, the oldest is dropped
};

class checkpoint_keeper {
public:
  /// Called on the keeper's thread once `file` is on its disk.
  using kept_fn = std::function<void(const std::string& file, const std::string& keeper)>;

  /// Starts its shard server on `transport` (which must outlive it) and its fetch thread.
  static result<std::unique_ptr<checkpoint_keeper>> start(comm::transport& transport,
                                                          checkpoint_keeper_options options);
  /// The same on a transport of its own, which lives as long as the keeper (a keeper shared
  /// with a supervisor may outlive whoever made it).
  static result<std::shared_ptr<checkpoint_keeper>> start(std::unique_ptr<comm::transport> transport,
                                                          checkpoint_keeper_options options);
  ~checkpoint_keeper();
  checkpoint_keeper(const checkpoint_keeper&) = delete;
  checkpoint_keeper& operator=(const checkpoint_keeper&) = delete;

  /// Sets who hears of each kept file (before the first keep()).
  void on_kept(kept_fn fn);
  /// host:port of its shard server: a holder like a node's.
  std::string address() const;
  /// Queues a fetch of `file` (a checkpoint shard path, relative to a state folder) from the
  /// shard server at `holder`, unless it holds or fetches it already; returns at once. Paths
  /// that are no checkpoint shard (the survivors' in-memory state, checkpoints/<job>/mem) are
  /// ignored.
  void keep(const std::string& file, const std::string& holder);
  /// Files fetched and fetches failed so far (tests, logs).
  int kept() const;
  int failed() const;

private:
  checkpoint_keeper(comm::transport& transport, checkpoint_keeper_options options);
  struct request {
    std::string file, holder;
  };
  bool fetch(const request& r);
  void fetched(const std::string& file);
  void forget(const std::string& file);

  std::unique_ptr<comm::transport> owned_transport_;  // when it owns transport_: freed last
  comm::transport& transport_;
  const checkpoint_keeper_options options_;
  std::unique_ptr<shard_server> server_;
  mutable std::mutex mu_;
  std::set<std::string> known_;  // queued, being fetched or on disk
  kept_fn on_kept_;
  std::unique_ptr<request_worker<request>> worker_;  // last: stopped first
};

/// Removes, under a job's checkpoint folder `job_dir` (checkpoints/<job>), the plan folders
/// older than the two newest that hold a complete checkpoint (a folder without one that is
/// newer than them stays: it may still be arriving), and prunes each kept one to its newest
/// `keep` complete checkpoints. The survivors' memory folder (mem) is never touched.
void prune_kept_checkpoints(const std::string& job_dir, int keep);

}  // namespace sailor::train
