#pragma once
// Placement: a pipeline template's replicas on the zones of a zone set.

#include <optional>
#include <vector>

#include "search_space.hpp"

namespace sailor::planner::detail {

/// How replicas are laid on zones.
enum class placement_order {
  /// Whole pipelines in one zone where they fit: transfers stay inside zones, rings cross them.
  pipeline_major,
  /// Stage by stage in stage order, filling the zones in order: rings stay inside zones,
  /// pipelines cross them.
  stage_major,
  /// Stage-major, the stages needing the most GPUs per replica first (the hardest to fit).
  widest_stage_first,
};

class placer {
public:
  explicit placer(const search_space& space) : space_(space) {}

  /// `shape` with `replicas` replicas per stage at micro-batch `mbs` on the zones of `zs`, or
  /// nothing when they do not fit. With `mixed`, where a stage's GPU type has run out, a
  /// replica of another (type, TP) that is no slower on the stage's layers than the pipeline's
  /// slowest stage and fits memory takes its place (the cheapest per micro-batch).
  std::optional<config::plan> place(const pipeline_shape& shape, const zone_set& zs, int mbs, int replicas,
                                    placement_order order, bool mixed) const;

private:
  struct slot {
    int gpu, zone, tp;
  };
  struct stand_in {
    double usd_per_micro_batch;
    int gpu, tp;
  };
  int& left(int gpu, int zone) const { return left_[size_t(gpu) * size_t(space_.num_zones()) + size_t(zone)]; }
  bool place_pipelines(const pipeline_shape& shape, const zone_set& zs, int replicas, bool mixed) const;
  bool place_stages(const pipeline_shape& shape, const zone_set& zs, int replicas, bool widest_first,
                    bool mixed) const;
  // A stand-in replica for stage `s`, in `prefer_zone` when it has room (-1: none preferred).
  bool substitute(const pipeline_shape& shape, int s, const zone_set& zs, int prefer_zone) const;
  const std::vector<stand_in>& stand_ins(const pipeline_shape& shape, int s) const;
  config::plan to_plan(const pipeline_shape& shape, int mbs) const;

  const search_space& space_;
  // Scratch of one place() call (logically const): GPUs left per (type, zone), the replicas
  // per stage as indices (names only in the plan returned), the stand-ins found per stage.
  mutable std::vector<int> left_;
  mutable std::vector<std::vector<slot>> reps_;
  mutable std::vector<std::vector<stand_in>> stand_ins_;
  mutable std::vector<char> stand_ins_known_;
  mutable int micro_batches_ = 1, mbs_ = 1;
  mutable double bottleneck_ = 0;
};

}  // namespace sailor::planner::detail
