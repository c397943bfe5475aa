#include "sailor/config/local_sgd.hpp"

#include <algorithm>

#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"

namespace sailor::config {

std::vector<local_sgd_plan::region> regions_of(const plan& p, const cluster& c) {
  std::vector<local_sgd_plan::region> out;
  for (const auto& s : p.stages)
    for (const auto& r : s.replicas) {
      const zone* z = c.find_zone(r.zone);
      const std::string name = z && !z->region.empty() ? z->region : region_of_zone(r.zone);
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.name == name; });
      if (it == out.end()) it = out.insert(out.end(), local_sgd_plan::region{name, {}});
      if (std::find(it->zones.begin(), it->zones.end(), r.zone) == it->zones.end()) it->zones.push_back(r.zone);
    }
  return out;
}

status apply_data_parallel(plan& p, const job& j, const cluster& c, int inner_steps, bool first_plan) {
  if (j.data_parallel.across_regions != across_regions_mode::diloco || p.local_sgd) return {};
  local_sgd_plan l;
  l.regions = regions_of(p, c);
  if (l.regions.size() < 2 && !first_plan) {
    log::get("config")->info("the new plan lies inside one region: its replicas synchronise every iteration "
                             "until a plan spans regions again (data_parallel.across_regions: diloco)");
    return {};
  }
  l.inner_steps = j.data_parallel.inner_steps > 0 ? j.data_parallel.inner_steps
                  : inner_steps > 0               ? inner_steps
                                                  : default_inner_steps;
  const std::string field = "data_parallel.across_regions";
  if (l.regions.size() < 2)
    return error::invalid_input("", field,
                                field + ": diloco joins regions, and this plan lies inside one (" +
                                    (l.regions.empty() ? std::string{"none"} : l.regions.front().name) +
                                    "): its replicas synchronise every iteration; set across_regions: sync, or "
                                    "place replicas in two or more regions");
  plan joined = p;
  joined.local_sgd = l;
  if (auto bad = validate_plan(joined, model_shape{}, nullptr, "")) {
    auto e = *bad;
    e.message = field + ": the plan cannot run DiLoCo across its regions: " + e.message;
    e.field = field;
    return e;
  }
  p = std::move(joined);
  return {};
}

std::string describe_local_sgd(const plan& p) {
  if (!p.local_sgd) return "synchronous";
  std::string names;
  for (const auto& r : p.local_sgd->regions) names += (names.empty() ? "" : ", ") + r.name;
  return "DiLoCo across " + std::to_string(p.local_sgd->regions.size()) + " regions (" + names + "), every " +
         std::to_string(p.local_sgd->inner_steps) + " iterations";
}

}  // namespace sailor::config
