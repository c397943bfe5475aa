#include "sailor/config/cluster.hpp"

#include <algorithm>
#include <cmath>

namespace sailor::config {

std::string region_of_zone(std::string_view zone) {
  auto dash = zone.rfind('-');
  return std::string(dash == std::string_view::npos ? zone : zone.substr(0, dash));
}

double bandwidth_curve::at(double bytes) const {
  if (points.empty()) return 0;
  if (bytes <= points.front().first) return points.front().second;
  if (bytes >= points.back().first) return points.back().second;
  auto hi = std::lower_bound(points.begin(), points.end(), bytes,
                             [](const auto& p, double b) { return p.first < b; });
  auto lo = hi - 1;
  double x0 = std::log2(lo->first), x1 = std::log2(hi->first), x = std::log2(bytes);
  double t = x1 > x0 ? (x - x0) / (x1 - x0) : 0;
  return lo->second + t * (hi->second - lo->second);
}

double zone_link::bytes_per_s(double bytes) const {
  double gbps = curve ? curve->at(bytes) : bandwidth_gbytes_per_s;
  return gbps * 1e9;
}

double zone_link::transfer_s(double bytes) const {
  if (bytes <= 0) return latency_s;
  double bw = bytes_per_s(bytes);
  return latency_s + (bw > 0 ? bytes / bw : INFINITY);
}

const zone* cluster::find_zone(std::string_view name) const {
  auto it = std::find_if(zones.begin(), zones.end(), [name](const zone& z) { return z.name == name; });
  return it == zones.end() ? nullptr : &*it;
}

zone& cluster::add_zone(std::string_view name) {
  auto it = std::find_if(zones.begin(), zones.end(), [name](const zone& z) { return z.name == name; });
  if (it != zones.end()) return *it;
  zone& z = zones.emplace_back(zone{std::string(name), region_of_zone(name), {}});
  auto r = std::find_if(regions.begin(), regions.end(), [&](const region& x) { return x.name == z.region; });
  if (r == regions.end()) regions.push_back(region{z.region, {z.name}});
  else r->zones.push_back(z.name);
  return z;
}

zone_link cluster::link(std::string_view a, std::string_view b) const {
  for (const auto& l : links) {
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l;
  }
  zone_link out;
  if (a == b) {
    out = defaults.same_zone;
  } else {
    const zone* za = find_zone(a);
    const zone* zb = find_zone(b);
    bool same_region = za && zb && za->region == zb->region;
    out = same_region ? defaults.same_region : defaults.cross_region;
  }
  out.from = std::string(a);
  out.to = std::string(b);
  return out;
}

double cluster::usd_per_gpu_hour(std::string_view type) const {
  const gpu_spec* g = gpus.find(type);
  if (!g) return 0;
  return use_spot_prices ? g->spot_usd_per_hour : g->on_demand_usd_per_hour;
}

int cluster::total_gpus() const {
  int n = 0;
  for (const auto& z : zones)
    for (const auto& [type, count] : z.gpus) n += count;
  return n;
}

}  // namespace sailor::config
