#pragma once
// Local moves on complete plans. The program ranks partial pipelines without knowing where
// placement will put them (zones, cross-zone sends and egress), so its best plans can be a move
// or two from better ones; the search climbs from them over moves that keep a plan's shape
// simple: shift a stage boundary by a layer, change a stage's TP, GPU type or zone, move one
// replica to another zone, add or drop a replica of a stage, merge two neighbour stages,
// split a stage.

#include <functional>
#include <vector>

#include "search_space.hpp"

namespace sailor::planner::detail {

class local_moves {
public:
  explicit local_moves(const search_space& space) : space_(space) {}

  /// Gives every neighbour of `p` to `visit`, in a fixed order, until it returns false (then
  /// returns false). Neighbours are unchecked: see `normalize` and `within_availability`.
  bool for_each_neighbour(const config::plan& p, const std::function<bool(config::plan&&)>& visit) const;

  /// Sets recomputation exactly where a stage would not fit without it; false when a stage is
  /// empty or some replica's (type, TP) has no table at the plan's micro-batch or spans nodes.
  bool normalize(config::plan& p) const;
  /// Whether the pool has the GPUs `p` uses, per type and zone.
  bool within_availability(const config::plan& p) const;

  /// Zones a move may go to: every zone of a small pool (16 zones at most); in a large one,
  /// the zones of the regions the plan already uses and the two largest zones (a move to a
  /// far, small zone is what the zone sets already judged).
  std::vector<int> move_zones(const config::plan& p) const;

private:
  using visitor = std::function<bool(config::plan&&)>;
  // The moves of stage `s`, each kind in the order for_each_neighbour gives them.
  bool shift_boundary(const config::plan& p, int s, const visitor& visit) const;
  bool change_kind(const config::plan& p, int s, const visitor& visit) const;
  bool change_zones(const config::plan& p, int s, const std::vector<int>& zones, const visitor& visit) const;
  bool add_or_drop_replica(const config::plan& p, int s, const std::vector<int>& zones, const visitor& visit) const;
  bool merge_with_next(const config::plan& p, int s, const visitor& visit) const;
  bool split(const config::plan& p, int s, const std::vector<int>& zones, const visitor& visit) const;
  // `reps` as (type, TP), moved to `zone` unless it is -1.
  std::vector<config::replica> with_kind(std::vector<config::replica> reps, int gpu, int tp, int zone) const;

  const search_space& space_;
};

}  // namespace sailor::planner::detail
