#include "placement.hpp"

#include <algorithm>

namespace sailor::planner::detail {

const std::vector<placer::stand_in>& placer::stand_ins(const pipeline_shape& shape, int s) const {
  // They depend on the stage alone (speed and memory), not on what is left: found once per
  // stage, in the order they are tried.
  auto& found = stand_ins_[size_t(s)];
  if (stand_ins_known_[size_t(s)]) return found;
  stand_ins_known_[size_t(s)] = 1;
  const auto& tab = space_.tab();
  const auto& st = shape[size_t(s)];
  const int in_flight = std::min(micro_batches_, int(shape.size()) - s);
  for (int g = 0; g < space_.gpu_types(); ++g) {
    for (int t : tab.tps(g, mbs_)) {
      const auto* tb = tab.find(g, t, mbs_);
      double tt = tb->time(st.first, st.end, st.recompute);
      if (tt > bottleneck_ * (1 + 1e-9)) continue;
      if (tab.stage_memory(*tb, st.first, st.end, st.recompute, in_flight) > tab.memory_bytes(g)) continue;
      found.push_back({t * tab.usd_per_gpu_s(g) * tt, g, t});
    }
  }
  return found;
}

bool placer::substitute(const pipeline_shape& shape, int s, const zone_set& zs, int prefer_zone) const {
  struct pick {
    double usd;
    int gpu, tp, zone;
  };
  std::optional<pick> best;
  for (const auto& o : stand_ins(shape, s)) {
    int zone = -1;
    if (prefer_zone >= 0 && left(o.gpu, prefer_zone) >= o.tp) zone = prefer_zone;
    for (int z : zs.zones)
      if (zone < 0 && left(o.gpu, z) >= o.tp) zone = z;
    if (zone < 0) continue;
    if (!best || o.usd_per_micro_batch < best->usd) best = pick{o.usd_per_micro_batch, o.gpu, o.tp, zone};
  }
  if (!best) return false;
  left(best->gpu, best->zone) -= best->tp;
  reps_[size_t(s)].push_back({best->gpu, best->zone, best->tp});
  return true;
}

bool placer::place_pipelines(const pipeline_shape& shape, const zone_set& zs, int replicas, bool mixed) const {
  const int S = int(shape.size());
  std::vector<int> need(size_t(space_.gpu_types()), 0);
  for (const auto& s : shape) need[size_t(s.gpu)] += s.tp;
  for (int i = 0; i < replicas; ++i) {
    int home = -1;
    for (int z : zs.zones) {
      bool ok = true;
      for (int g = 0; g < space_.gpu_types() && ok; ++g) ok = left(g, z) >= need[size_t(g)];
      if (ok) {
        home = z;
        break;
      }
    }
    int prev = home;
    for (int s = 0; s < S; ++s) {
      const auto& st = shape[size_t(s)];
      int z = -1;
      if (prev >= 0 && left(st.gpu, prev) >= st.tp) z = prev;
      if (z < 0) {
        int most = 0;
        for (int zz : zs.zones)
          if (left(st.gpu, zz) >= st.tp && left(st.gpu, zz) > most) most = left(st.gpu, zz), z = zz;
      }
      if (z < 0) {
        if (!mixed || !substitute(shape, s, zs, prev)) return false;
        continue;
      }
      left(st.gpu, z) -= st.tp;
      reps_[size_t(s)].push_back({st.gpu, z, st.tp});
      prev = z;
    }
  }
  return true;
}

bool placer::place_stages(const pipeline_shape& shape, const zone_set& zs, int replicas, bool widest_first,
                          bool mixed) const {
  const int S = int(shape.size());
  std::vector<int> order(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) order[size_t(s)] = s;
  if (widest_first)
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return shape[size_t(x)].tp > shape[size_t(y)].tp; });
  for (int s : order) {
    const auto& st = shape[size_t(s)];
    auto& reps = reps_[size_t(s)];
    for (int i = 0; i < replicas; ++i) {
      int z = -1;
      for (int zz : zs.zones)
        if (left(st.gpu, zz) >= st.tp) {
          z = zz;
          break;
        }
      if (z < 0) {
        if (!mixed || !substitute(shape, s, zs, -1)) return false;
        continue;
      }
      left(st.gpu, z) -= st.tp;
      reps.push_back({st.gpu, z, st.tp});
    }
    // Replicas in zone order (only substitutes can be out of it).
    std::vector<int> rank(reps.size());
    for (size_t i = 0; i < rank.size(); ++i) rank[i] = zs.rank_of(reps[i].zone);
    if (!std::is_sorted(rank.begin(), rank.end())) {
      std::vector<size_t> idx(rank.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return rank[x] < rank[y]; });
      std::vector<slot> sorted;
      sorted.reserve(idx.size());
      for (size_t i : idx) sorted.push_back(reps[i]);
      reps = std::move(sorted);
    }
  }
  return true;
}

config::plan placer::to_plan(const pipeline_shape& shape, int mbs) const {
  const auto& names = space_.tab().gpu_names();
  config::plan p;
  p.micro_batch = mbs;
  p.global_batch = space_.global_batch();
  for (size_t s = 0; s < shape.size(); ++s) {
    config::stage_plan sp;
    sp.first_layer = shape[s].first;
    sp.num_layers = shape[s].end - shape[s].first;
    sp.recompute = shape[s].recompute;
    sp.replicas.reserve(reps_[s].size());
    for (const auto& r : reps_[s]) sp.replicas.push_back({names[size_t(r.gpu)], space_.zone_name(r.zone), r.tp, {}, {}});
    p.stages.push_back(std::move(sp));
  }
  return p;
}

std::optional<config::plan> placer::place(const pipeline_shape& shape, const zone_set& zs, int mbs, int replicas,
                                          placement_order order, bool mixed) const {
  const auto& tab = space_.tab();
  left_.assign(size_t(space_.gpu_types()) * size_t(space_.num_zones()), 0);
  for (int g = 0; g < space_.gpu_types(); ++g)
    for (int z : zs.zones) left(g, z) = space_.available(g, z);
  const size_t S = shape.size();
  mbs_ = mbs;
  micro_batches_ = space_.micro_batches(mbs, replicas);
  bottleneck_ = 0;
  for (const auto& s : shape) bottleneck_ = std::max(bottleneck_, tab.find(s.gpu, s.tp, mbs)->time(s.first, s.end, s.recompute));
  if (reps_.size() < S) reps_.resize(S);
  for (size_t s = 0; s < S; ++s) {
    reps_[s].clear();
    reps_[s].reserve(size_t(replicas));
  }
  stand_ins_.assign(S, {});
  stand_ins_known_.assign(S, 0);
  const bool placed = order == placement_order::pipeline_major
                          ? place_pipelines(shape, zs, replicas, mixed)
                          : place_stages(shape, zs, replicas, order == placement_order::widest_stage_first, mixed);
  if (!placed) return std::nullopt;
  return to_plan(shape, mbs);
}

}  // namespace sailor::planner::detail
