#pragma once
// Private to node training: each checkpoint shard a rank writes is also copied to a node of
// the plan outside its stage (node_recovery.hpp's handover_target), so that the checkpoint
// outlives the whole stage. Without it, a stage whose every replica dies at once (SIGKILL,
// across hosts) takes its checkpoint with it, and the job starts over from iteration 0.
//
//   rank (training thread)           copier thread                   target's shard_server
//   wrote iter-N/<shard> -> copy() -> reads state_dir/<path> -------> memory_shards::put
//   (returns at once; the next        hand_over_shard, bounded        (keeps the newest 2
//    iteration is not held)           by the job's timeout            iterations of the
//                                                                     folder) -> tells its
//                                                                     supervisor: a holder
//
// At most `max_pending` copies wait; a newer one pushes the oldest out (a newer checkpoint
// makes it moot). No LibTorch here.

#include <chrono>
#include <string>

#include "sailor/comm/transport.hpp"
#include "sailor/train/request_worker.hpp"

namespace sailor::train {

class checkpoint_copier {
public:
  /// Copies files of `state_dir` over `transport` (which must outlive it); `node` names the
  /// log lines.
  checkpoint_copier(comm::transport& transport, std::string state_dir, std::string node);
  checkpoint_copier(const checkpoint_copier&) = delete;
  checkpoint_copier& operator=(const checkpoint_copier&) = delete;

  /// Queues a copy of `path` (relative to the state folder) to the shard server at `target`
  /// (host:port), bounded by `timeout`. Returns at once.
  void copy(const std::string& path, const std::string& target, std::chrono::milliseconds timeout);

  /// Copies made and failed so far (for tests and logs).
  int copied() const { return worker_.done(); }
  int failed() const { return worker_.failed(); }

  static constexpr std::size_t max_pending = 8;

private:
  struct request {
    std::string path, target;
    std::chrono::milliseconds timeout{};
  };
  bool copy_now(const request& r);

  comm::transport& transport_;
  const std::string state_dir_, node_;
  request_worker<request> worker_;  // last: stopped first
};

}  // namespace sailor::train
