#pragma once
/// Who may ask a node's shard server for what (shard_service.hpp). The peer is named by the
/// name it authenticated as with the job token (comm::peer_info::name), and judged against
/// the plans the node was told of: the current one and the one before it.
///
///   fetch ("get", "stat", "range") of a shard of layers [a, b):
///     a node of the current or the previous plan whose stage there holds any of [a, b)
///     (what its rank restores), or a service of the job (the coordinator's keeper)
///   hand-over of a shard (checkpoints/<job>/<folder>/iter-<n>/<shard>):
///     a node of the current or the previous plan P, for layers of its own stage in P,
///     into P's folders (its checkpoint folder, or the job's mem folder), for an iteration
///     n that P runs and that this node's ranks reached (at most one past their last
///     completed iteration: a pipeline's stages end an iteration one after another), and
///     within a budget of bytes per peer (memory_shards::hold_from)
///
/// Anything else is refused with the reason, which the server sends back and the asking
/// node logs. Before the node was told of any plan only services may fetch, and nobody
/// hands over. No LibTorch here. Thread-safe.

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sailor::train {

/// A plan as the shard service judges requests by: its nodes and their layers, its folders
/// and the iterations it runs. A value type.
struct plan_members {
  std::int64_t version = 0;
  /// checkpoints/<job>/v<N>: the plan's checkpoint folder (relative to state folders).
  std::string checkpoint_dir;
  /// Each node of the plan with the layers [first, end) of each stage it has a role in.
  std::vector<std::pair<std::string, std::vector<std::pair<int, int>>>> nodes;
  int start_iteration = 0;  ///< it resumes after this many iterations
  int end_iteration = 0;    ///< it runs up to this many
};

class shard_access {
public:
  /// Peers' hand-overs held at most `max_held_bytes` together (sailor-node --max-held-state).
  explicit shard_access(std::int64_t max_held_bytes = default_max_held_bytes);

  static constexpr std::int64_t default_max_held_bytes = std::int64_t{4096} << 20;

  /// Names that may fetch any shard without being a node of a plan (the coordinator's
  /// checkpoint keeper).
  void set_services(std::set<std::string> names);
  /// The node was told of a plan: it becomes the current one, the current one the previous
  /// one (the version told again changes nothing; a lower one is a restarted coordinator's).
  void plan(plan_members p);
  /// This node's ranks completed `iterations` iterations of plan `version`.
  void completed(std::int64_t version, int iterations);

  /// Empty when `peer` may fetch `path`; else why not.
  std::string may_fetch(const std::string& peer, const std::string& path) const;
  /// Empty when `peer` may hand `path` over; else why not (the bytes are checked by
  /// memory_shards::hold_from against budget_per_peer() and max_held_bytes()).
  std::string may_hand_over(const std::string& peer, const std::string& path) const;

  std::int64_t max_held_bytes() const { return max_held_; }
  /// The bytes one peer's hand-overs may take: max_held_bytes() shared among the other nodes
  /// of the current and previous plans (all of it when there is none).
  std::int64_t budget_per_peer() const;
  /// This node's own name (not counted among the peers that share the budget).
  void set_self(std::string name);

private:
  struct known_plan {
    plan_members members;
    int reached = 0;  // iterations this node's ranks completed in it
  };
  std::string hand_over_in(const known_plan& p, const std::string& peer,
                           const std::string& path) const;
  std::vector<const known_plan*> plans() const;  // current first; holds mu_

  const std::int64_t max_held_;
  mutable std::mutex mu_;
  std::set<std::string> services_;
  std::string self_;
  std::optional<known_plan> current_, previous_;
};

}  // namespace sailor::train
