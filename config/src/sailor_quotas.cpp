// Sailor's quotas files: GPUs available per type and zone, checked against Sailor's data and
// made into a cluster with Sailor's links and prices.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sailor/config/sailor_format.hpp"
#include "sailor_json.hpp"

namespace sailor::config {

using namespace sailor_json;


result<std::map<std::string, std::map<std::string, int>>> load_sailor_quotas(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.error();
  std::map<std::string, std::map<std::string, int>> out;
  if (!j->is_object()) return error::invalid_input(path, "", "expected {gpu_type: {zone: count}}");
  for (const auto& [gpu, zones] : j->items()) {
    if (!zones.is_object()) return error::invalid_input(path, gpu, "expected {zone: count}");
    for (const auto& [zone, count] : zones.items()) {
      if (!count.is_number_integer() || count.get<int>() < 0)
        return error::invalid_input(path, gpu + "." + zone, "expected a non-negative integer");
      out[gpu][zone] = count.get<int>();
    }
  }
  return out;
}

status check_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                    const sailor_data& data, const std::string& file) {
  std::set<std::string> zones;
  for (const auto& [ends, fit] : data.network.fits) {
    zones.insert(ends.first.zone);
    zones.insert(ends.second.zone);
  }
  for (const auto& [ends, price] : data.network.egress_usd_per_gb) {
    zones.insert(ends.first);
    zones.insert(ends.second);
  }
  auto listed = [](const auto& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  for (const auto& [gpu, counts] : quotas) {
    if (!data.gpus.find(gpu)) {
      std::vector<std::string> known;
      for (const auto& g : data.gpus.gpus()) known.push_back(g.name);
      return error::invalid_input(file, gpu,
                                  "unknown GPU type '" + gpu + "' (known: " + listed(known) + ")");
    }
    for (const auto& [zone_name, count] : counts)
      if (!zones.empty() && !zones.count(zone_name))
        return error::invalid_input(file, gpu + "." + zone_name,
                                    "unknown zone '" + zone_name + "': Sailor's data in " + data.root +
                                        " has no bandwidth or price for it (known: " + listed(zones) + ")");
  }
  return std::nullopt;
}

cluster cluster_from_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                            const sailor_data& data) {
  cluster c;
  c.name = "sailor-quotas";
  c.gpus = data.gpus;
  for (const auto& [gpu, zones] : quotas)
    for (const auto& [zone_name, count] : zones) c.add_zone(zone_name).gpus[gpu] += count;
  // One link per zone pair (and per zone): the Sailor fit of the first GPU type both zones
  // hold, one GPU per node, sampled as a curve; the fit's small-message floor stands in for
  // latency. Egress from communication_cost.json.
  for (size_t i = 0; i < c.zones.size(); ++i) {
    for (size_t k = i; k < c.zones.size(); ++k) {
      const zone& a = c.zones[i];
      const zone& b = c.zones[k];
      zone_link l = c.link(a.name, b.name);
      l.latency_s = 0;
      const sailor_bandwidth_fit* fit = nullptr;
      for (const auto& [ga, na] : a.gpus) {
        for (const auto& [gb, nb] : b.gpus) {
          fit = data.network.find({a.name, ga, 1}, {b.name, gb, 1});
          if (fit) break;
        }
        if (fit) break;
      }
      if (fit) {
        bandwidth_curve curve;
        for (double bytes = 1e3; bytes <= 2e10; bytes *= 2) curve.points.emplace_back(bytes, fit->gbytes_per_s(bytes));
        l.bandwidth_gbytes_per_s = curve.points.back().second;
        l.curve = std::move(curve);
      }
      auto price = data.network.egress_usd_per_gb.find({a.name, b.name});
      if (price != data.network.egress_usd_per_gb.end()) l.egress_usd_per_gb = price->second;
      if (fit || price != data.network.egress_usd_per_gb.end()) c.links.push_back(l);
    }
  }
  return c;
}

}  // namespace sailor::config
