#pragma once
// The 1F1B schedule of every replica of every stage, and the global rank layout of a plan.
// No LibTorch here: the schedule is a pure function of the plan (tested without torch).

#include <string>
#include <vector>

#include <sailor/train/executor.hpp>

namespace sailor::train {

/// One step of a replica's schedule: forward or backward of global micro-batch `micro_batch`.
struct schedule_op {
  bool forward = true;
  int micro_batch = 0;

  bool operator==(const schedule_op&) const = default;
};

/// Micro-batches of one iteration (global batch / micro batch).
int micro_batches_per_iteration(const config::plan& p);

/// The replica of `stage` that processes micro-batch `m`.
inline int replica_of(const config::plan& p, int stage, int m) {
  return m % static_cast<int>(p.stages[stage].replicas.size());
}

/// Ordered schedules of every (stage, replica): a 1F1B order (at most num_stages - stage
/// forwards in flight, a ready backward first), taken from a simulation of the whole plan
/// with unit forward and double backward times. Executing these orders with non-blocking
/// sends and blocking receives cannot deadlock: the simulation is one valid global order.
/// Indexed [stage][replica].
std::vector<std::vector<std::vector<schedule_op>>> one_f_one_b(const config::plan& p);

/// A communicator group: name and member global ranks (in rank order).
struct group_spec {
  std::string name;
  std::vector<int> members;
  int stage = -1;            ///< for data-parallel groups
  std::vector<int> pieces;   ///< data-parallel groups: the piece indices reduced in it
  /// Members in several zones: the group all-reduces hierarchically (comm/hierarchical.hpp)
  /// and is made from its zone groups, which come right before it; `zones` holds each
  /// member's zone.
  bool hierarchical = false;
  std::vector<std::string> zones;
  /// A zone group (the members of one zone, two or more, in group order): the name of the
  /// hierarchical group it belongs to.
  std::string zone_group_of;
  /// DiLoCo (plan.local_sgd): what the group is for. `region` >= 0 with stage < 0: every rank
  /// of that region (the loss, norm and tied-embedding all-reduces); with stage >= 0: the
  /// region's replicas of the stage (`use` says whether they reduce gradients every
  /// iteration or receive the outer step's average from their region's leader).
  /// outer_exchange: one leader per region (its first replica of the stage).
  enum class purpose { plain, region, region_sync, outer_exchange };
  purpose use = purpose::plain;
  int region = -1;
};

/// DiLoCo's regions as ranks see them (plan.local_sgd): the region index of every replica,
/// and each region's leader replica of every stage (its first). Empty without local_sgd.
struct region_layout {
  std::vector<std::vector<int>> region_of;  ///< [stage][replica]
  std::vector<std::vector<int>> leader;     ///< [stage][region]: replica index, -1 when none
  int regions = 0;

  bool empty() const { return regions == 0; }
  int region_of_role(const rank_role& r) const { return region_of[r.stage][r.replica]; }
  bool leads(const rank_role& r) const { return leader[r.stage][region_of_role(r)] == r.replica; }
};
region_layout regions_of(const config::plan& p);

/// Data-parallel pieces of a stage: the full extent of every sharded dimension cut at every
/// replica's shard boundaries, in units of 1/lcm(TP degrees). pieces[p] = [begin, end).
struct stage_pieces {
  int units = 1;  ///< lcm of the TP degrees of the stage's replicas
  std::vector<std::pair<int, int>> bounds;
};
stage_pieces pieces_of(const config::plan& p, int stage);

/// The global ranks `role` exchanges activations and gradients with (both directions: a pair
/// of ranks of adjacent stages with different TP degrees may move data one way only): the
/// peers of its point-to-point channel, in rank order.
std::vector<int> p2p_peers(const config::plan& p, const rank_role& role);

/// Every group of a plan in the one global order in which ranks create them: world, then
/// tensor-parallel groups of every replica, then data-parallel groups of every stage, then,
/// when the world spans zones, its zone groups and the hierarchical world ("world.zones",
/// for the loss, norm and tied-embedding all-reduces). A data-parallel group that spans zones
/// is hierarchical, preceded by its zone groups. Under DiLoCo (plan.local_sgd, every replica
/// of a stage at one TP degree) the data-parallel groups are each region's ("dp.sS.pK.gR",
/// with "sync.sS.pK.gR" beside them), followed by the leaders' exchange groups
/// ("outer.sS.pK") and each region's group of all its ranks ("region.gR").
std::vector<group_spec> groups_of(const config::plan& p);

}  // namespace sailor::train
