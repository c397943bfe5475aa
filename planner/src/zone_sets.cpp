#include "zone_sets.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace sailor::planner::detail {

namespace {

class zone_set_builder {
public:
  explicit zone_set_builder(const search_space& space) : space_(space) {}

  // Adds `zones` (in placement order) unless a set of the same zones is there already.
  void add(std::vector<int> zones) {
    std::sort(zones.begin(), zones.end(), [&](int a, int b) {
      int ca = space_.zone_capacity(a), cb = space_.zone_capacity(b);
      return ca != cb ? ca > cb : space_.zone_name(a) < space_.zone_name(b);
    });
    for (const auto& z : sets_) {
      auto x = z.zones, y = zones;
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      if (x == y) return;
    }
    zone_set s;
    s.zones = zones;
    s.capacity.assign(size_t(space_.gpu_types()), 0);
    for (int g = 0; g < space_.gpu_types(); ++g)
      for (int z : zones) s.capacity[size_t(g)] += space_.available(g, z);
    sets_.push_back(std::move(s));
  }

  // GPUs of type `g` (every type: -1) in `zones`.
  int capacity(const std::vector<int>& zones, int g) const {
    int n = 0;
    for (int z : zones) n += g < 0 ? space_.zone_capacity(z) : space_.available(g, z);
    return n;
  }

  std::vector<zone_set> take() { return std::move(sets_); }

private:
  const search_space& space_;
  std::vector<zone_set> sets_;
};

using region_zones = std::vector<std::pair<std::string, std::vector<int>>>;

// Regions with their zones, most GPUs first.
region_zones regions_by_size(const search_space& space, const zone_set_builder& sets) {
  std::map<std::string, std::vector<int>> regions;
  for (int z = 0; z < space.num_zones(); ++z) regions[space.region_of(z)].push_back(z);
  region_zones order(regions.begin(), regions.end());
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return sets.capacity(a.second, -1) > sets.capacity(b.second, -1);
  });
  return order;
}

// Regions added outwards from the largest, the best-connected first, at 2, 3, 4, 6, 9, ...
// regions (all of them is the set of all zones, added before).
void add_region_chains(const search_space& space, const region_zones& order, zone_set_builder& sets) {
  const auto& cluster = space.prob().cluster;
  const std::string& first_zone = space.zone_name(order[0].second[0]);
  std::vector<double> bw_of(order.size(), 0);
  for (size_t i = 1; i < order.size(); ++i)
    bw_of[i] = 1.0 / std::max(1e-12, cluster.link(first_zone, space.zone_name(order[i].second[0])).transfer_s(1e9));
  std::vector<size_t> rest;
  for (size_t i = 1; i < order.size(); ++i) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return bw_of[a] > bw_of[b]; });
  std::vector<int> acc = order[0].second;
  size_t next_size = 2;
  for (size_t k = 0; k + 1 < rest.size(); ++k) {
    const auto& zs = order[rest[k]].second;
    acc.insert(acc.end(), zs.begin(), zs.end());
    const size_t regions_in = k + 2;
    if (regions_in < next_size) continue;
    sets.add(acc);
    next_size = regions_in < 4 ? regions_in + 1 : regions_in + regions_in / 2;
  }
}

}  // namespace

std::vector<zone_set> make_zone_sets(const search_space& space) {
  zone_set_builder sets(space);
  const int zones = space.num_zones();
  std::vector<int> all(static_cast<size_t>(zones));
  for (int z = 0; z < zones; ++z) all[size_t(z)] = z;
  sets.add(all);
  if (!space.opts().zone_subsets || zones == 1) return sets.take();
  std::vector<int> by_size = all;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int a, int b) { return space.zone_capacity(a) > space.zone_capacity(b); });
  for (int i = 0; i < std::min(zones, 2); ++i) sets.add({by_size[size_t(i)]});
  const region_zones order = regions_by_size(space, sets);
  constexpr int largest_regions = 3;
  for (int i = 0; i < int(order.size()) && i < largest_regions; ++i)
    if (order[size_t(i)].second.size() > 1) sets.add(order[size_t(i)].second);
  for (int g = 0; g < space.gpu_types(); ++g) {
    const auto* most = &order[0];
    for (const auto& r : order)
      if (sets.capacity(r.second, g) > sets.capacity(most->second, g)) most = &r;
    if (most->second.size() > 1 && sets.capacity(most->second, g) > 0) sets.add(most->second);
  }
  if (order.size() >= 2) add_region_chains(space, order, sets);
  return sets.take();
}

}  // namespace sailor::planner::detail
