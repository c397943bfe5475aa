#include "local_moves.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace sailor::planner::detail {

bool local_moves::within_availability(const config::plan& p) const {
  const auto& tab = space_.tab();
  std::vector<std::vector<int>> used(size_t(space_.gpu_types()), std::vector<int>(size_t(space_.num_zones()), 0));
  const config::replica* prev = nullptr;
  int g = -1, z = -1;
  for (const auto& s : p.stages)
    for (const auto& r : s.replicas) {
      // Names looked up again only when they change from the previous replica's.
      if (!prev || r.gpu_type != prev->gpu_type) g = tab.gpu_index(r.gpu_type);
      if (!prev || r.zone != prev->zone) z = space_.zone_index(r.zone);
      prev = &r;
      if (g < 0 || g >= space_.gpu_types() || z < 0) return false;
      used[size_t(g)][size_t(z)] += r.tp;
      if (used[size_t(g)][size_t(z)] > space_.available(g, z)) return false;
    }
  return true;
}

bool local_moves::normalize(config::plan& p) const {
  const auto& tab = space_.tab();
  const int S = p.num_stages();
  for (int s = 0; s < S; ++s) {
    auto& st = p.stages[size_t(s)];
    if (st.num_layers <= 0 || st.replicas.empty()) return false;
    const int m = space_.micro_batches(p.micro_batch, int(st.replicas.size()));
    const int in_flight = std::min(m, S - s);
    bool fits0 = true, fits1 = true;
    const config::replica* prev = nullptr;
    for (const auto& r : st.replicas) {
      // Replicas of the kind just checked fit as it does.
      if (prev && r.tp == prev->tp && r.gpu_type == prev->gpu_type) continue;
      prev = &r;
      int g = tab.gpu_index(r.gpu_type);
      if (g < 0) return false;
      const auto* tb = tab.find(g, r.tp, p.micro_batch);
      if (!tb || r.tp > tab.gpus_per_node(g)) return false;
      const double cap = tab.memory_bytes(g);
      fits0 = fits0 && tab.stage_memory(*tb, st.first_layer, st.end_layer(), false, in_flight) <= cap;
      fits1 = fits1 && tab.stage_memory(*tb, st.first_layer, st.end_layer(), true, in_flight) <= cap;
    }
    st.recompute = !fits0 && fits1 && space_.prob().job.allow_recompute;
  }
  return true;
}

std::vector<int> local_moves::move_zones(const config::plan& p) const {
  const int Z = space_.num_zones();
  std::vector<int> out;
  if (Z <= 16) {
    for (int z = 0; z < Z; ++z) out.push_back(z);
    return out;
  }
  std::set<std::string> regions;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      if (const auto* zone = space_.prob().cluster.find_zone(r.zone)) regions.insert(zone->region);
  std::vector<int> by_size;
  for (int z = 0; z < Z; ++z) {
    if (regions.count(space_.region_of(z))) out.push_back(z);
    else by_size.push_back(z);
  }
  std::partial_sort(by_size.begin(), by_size.begin() + long(std::min<size_t>(2, by_size.size())), by_size.end(),
                    [&](int a, int b) { return space_.zone_capacity(a) > space_.zone_capacity(b); });
  for (size_t i = 0; i < by_size.size() && i < 2; ++i) out.push_back(by_size[i]);
  return out;
}

std::vector<config::replica> local_moves::with_kind(std::vector<config::replica> reps, int gpu, int tp,
                                                    int zone) const {
  for (auto& r : reps) {
    r.gpu_type = space_.tab().gpu_names()[size_t(gpu)];
    r.tp = tp;
    if (zone >= 0) r.zone = space_.zone_name(zone);
  }
  return reps;
}

// The boundary with the next stage, one layer either way.
bool local_moves::shift_boundary(const config::plan& p, int s, const visitor& visit) const {
  if (s + 1 >= p.num_stages()) return true;
  for (int d : {-1, 1}) {
    config::plan q = p;
    q.stages[size_t(s)].num_layers += d;
    q.stages[size_t(s) + 1].first_layer += d;
    q.stages[size_t(s) + 1].num_layers -= d;
    if (q.stages[size_t(s)].num_layers > 0 && q.stages[size_t(s) + 1].num_layers > 0 && !visit(std::move(q)))
      return false;
  }
  return true;
}

// The stage's GPU type and TP (zones kept).
bool local_moves::change_kind(const config::plan& p, int s, const visitor& visit) const {
  const auto& tab = space_.tab();
  const auto& st = p.stages[size_t(s)];
  for (int g = 0; g < space_.gpu_types(); ++g)
    for (int t : tab.tps(g, p.micro_batch)) {
      if (tab.gpu_names()[size_t(g)] == st.replicas[0].gpu_type && t == st.replicas[0].tp) continue;
      config::plan q = p;
      q.stages[size_t(s)].replicas = with_kind(st.replicas, g, t, -1);
      if (!visit(std::move(q))) return false;
    }
  return true;
}

// All the stage's replicas in one zone, or one replica moved there.
bool local_moves::change_zones(const config::plan& p, int s, const std::vector<int>& zones,
                               const visitor& visit) const {
  const auto& st = p.stages[size_t(s)];
  for (int z : zones) {
    const std::string& zone = space_.zone_name(z);
    config::plan q = p;
    for (auto& r : q.stages[size_t(s)].replicas) r.zone = zone;
    if (!visit(std::move(q))) return false;
    for (size_t r = 0; r < st.replicas.size(); ++r) {
      if (st.replicas[r].zone == zone) continue;
      if (r > 0 && st.replicas[r].zone == st.replicas[r - 1].zone &&
          st.replicas[r].gpu_type == st.replicas[r - 1].gpu_type && st.replicas[r].tp == st.replicas[r - 1].tp)
        continue;  // the same move as for the previous replica
      config::plan q2 = p;
      q2.stages[size_t(s)].replicas[r].zone = zone;
      if (!visit(std::move(q2))) return false;
    }
  }
  return true;
}

// One replica more (of the stage's last replica's kind, in any zone) or one fewer (the last
// one of a zone): data-parallel degrees that differ by stage.
bool local_moves::add_or_drop_replica(const config::plan& p, int s, const std::vector<int>& zones,
                                      const visitor& visit) const {
  if (!space_.opts().per_stage_replicas) return true;
  const auto& st = p.stages[size_t(s)];
  if (int(st.replicas.size()) < simulator::resolved_plan::max_replicas &&
      int(st.replicas.size()) < space_.global_batch() / std::max(1, p.micro_batch))
    for (int z : zones) {
      config::plan q = p;
      auto r = st.replicas.back();
      r.zone = space_.zone_name(z);
      r.nodes.clear();
      r.devices.clear();
      q.stages[size_t(s)].replicas.push_back(std::move(r));
      if (!visit(std::move(q))) return false;
    }
  if (st.replicas.size() > 1)
    for (size_t r = 0; r < st.replicas.size(); ++r) {
      if (r + 1 < st.replicas.size() && st.replicas[r + 1].zone == st.replicas[r].zone) continue;
      config::plan q = p;
      q.stages[size_t(s)].replicas.erase(q.stages[size_t(s)].replicas.begin() + long(r));
      if (!visit(std::move(q))) return false;
    }
  return true;
}

// Merged with the next stage: the replicas of either, at any TP of their type.
bool local_moves::merge_with_next(const config::plan& p, int s, const visitor& visit) const {
  if (s + 1 >= p.num_stages()) return true;
  const auto& tab = space_.tab();
  for (int side = 0; side < 2; ++side) {
    const auto& src = p.stages[size_t(s + side)].replicas;
    int g = tab.gpu_index(src[0].gpu_type);
    if (g < 0) continue;
    for (int t : tab.tps(g, p.micro_batch)) {
      config::plan q = p;
      q.stages[size_t(s)].num_layers += q.stages[size_t(s) + 1].num_layers;
      q.stages[size_t(s)].replicas = with_kind(src, g, t, -1);
      q.stages.erase(q.stages.begin() + s + 1);
      if (!visit(std::move(q))) return false;
    }
  }
  return true;
}

// Split in two: the first part keeps the replicas at any TP of their type, the second gets
// as many replicas of any (type, TP), in the same zones or all in one zone.
bool local_moves::split(const config::plan& p, int s, const std::vector<int>& zones, const visitor& visit) const {
  const auto& tab = space_.tab();
  const auto& st = p.stages[size_t(s)];
  const int b = p.micro_batch;
  for (int k = st.first_layer + 1; k < st.end_layer() && p.num_stages() < space_.max_stages(); ++k) {
    int g0 = tab.gpu_index(st.replicas[0].gpu_type);
    if (g0 < 0) break;
    for (int t0 : tab.tps(g0, b))
      for (int g = 0; g < space_.gpu_types(); ++g)
        for (int t : tab.tps(g, b))
          for (int zi = -1; zi < int(zones.size()); ++zi) {
            const int z = zi < 0 ? -1 : zones[size_t(zi)];
            config::plan q = p;
            auto& a = q.stages[size_t(s)];
            config::stage_plan c = a;
            a.num_layers = k - a.first_layer;
            a.replicas = with_kind(st.replicas, g0, t0, -1);
            c.first_layer = k;
            c.num_layers = st.end_layer() - k;
            c.replicas = with_kind(st.replicas, g, t, z);
            q.stages.insert(q.stages.begin() + s + 1, std::move(c));
            if (!visit(std::move(q))) return false;
          }
  }
  return true;
}

bool local_moves::for_each_neighbour(const config::plan& p, const visitor& visit) const {
  const std::vector<int> zones = move_zones(p);
  for (int s = 0; s < p.num_stages(); ++s) {
    if (!shift_boundary(p, s, visit) || !change_kind(p, s, visit) || !change_zones(p, s, zones, visit) ||
        !add_or_drop_replica(p, s, zones, visit) || !merge_with_next(p, s, visit) || !split(p, s, zones, visit))
      return false;
  }
  return true;
}

}  // namespace sailor::planner::detail
