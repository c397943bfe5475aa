#include "sailor/planner/spot_live.hpp"

#include <algorithm>
#include <random>

#include "sailor/config/pools.hpp"

namespace sailor::planner {

namespace {

// A uniform draw in [0, 1) from the generator's top 53 bits: the same on every standard library
// (std::uniform_real_distribution is not).
double uniform(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

status check_options(const availability_timeline& t, const live_slice_options& o) {
  if (o.nodes_per_zone < 1) return error::invalid_input("--nodes-per-zone", "expected at least 1 node per zone");
  if (!(o.kill_fraction >= 0 && o.kill_fraction <= 1))
    return error::invalid_input("--kill-fraction", "expected a fraction between 0 and 1");
  if (o.from_tick < 0 || o.from_tick >= t.ticks())
    return error::invalid_input("--from", "expected a tick from 0 to " + std::to_string(t.ticks() - 1) + ", got " +
                                std::to_string(o.from_tick));
  const int to = o.to_tick < 0 ? t.ticks() : o.to_tick;
  if (to <= o.from_tick || to > t.ticks())
    return error::invalid_input("--to", "expected a tick after --from (" + std::to_string(o.from_tick) + ") and at most " +
                                std::to_string(t.ticks()) + ", got " + std::to_string(o.to_tick));
  return {};
}

std::string sources(const availability_timeline& t) {
  std::string out;
  for (const auto& c : t.columns) out += (out.empty() ? "" : ", ") + c.source;
  return out;
}

}  // namespace

int live_script::initial_nodes() const {
  int n = 0;
  if (!nodes.empty())
    for (int k : nodes.front()) n += k;
  return n;
}

int live_script::tick_at(double s) const {
  auto i = std::upper_bound(start_s.begin(), start_s.end(), s);
  return std::max(0, static_cast<int>(i - start_s.begin()) - 1);
}

result<live_script> make_live_script(const availability_timeline& t, const live_slice_options& o) {
  if (auto err = check_options(t, o)) return *err;
  const int to = o.to_tick < 0 ? t.ticks() : o.to_tick;
  live_script s;
  s.columns = t.columns;
  s.from_tick = o.from_tick;
  const double origin = t.start_s[static_cast<std::size_t>(o.from_tick)];
  for (int k = o.from_tick; k < to; ++k) {
    s.start_s.push_back(t.start_s[static_cast<std::size_t>(k)] - origin);
    std::vector<int> row;
    for (int count : t.counts[static_cast<std::size_t>(k)]) row.push_back(std::min(count, o.nodes_per_zone));
    s.nodes.push_back(std::move(row));
  }
  s.end_s = (to < t.ticks() ? t.start_s[static_cast<std::size_t>(to)] : t.end_s) - origin;
  if (s.initial_nodes() == 0)
    return error::invalid_input(sources(t), "--from", "no GPU at tick " + std::to_string(o.from_tick) + " of the trace: the live replay needs a node to start with");
  std::mt19937_64 gen{o.seed};
  for (std::size_t k = 1; k < s.nodes.size(); ++k)
    for (std::size_t c = 0; c < s.columns.size(); ++c) {
      const int delta = s.nodes[k][c] - s.nodes[k - 1][c];
      if (delta == 0) continue;
      live_change ch{static_cast<int>(k), s.start_s[k], static_cast<int>(c), delta, 0};
      for (int i = 0; i < -delta; ++i) ch.without_notice += uniform(gen) < o.kill_fraction ? 1 : 0;
      if (delta > 0) s.starts += delta;
      else s.stops -= delta;
      s.stops_without_notice += ch.without_notice;
      s.changes.push_back(ch);
    }
  return s;
}

int add_on_demand_pools(live_script& s, const config::cluster& c, int nodes_per_zone) {
  int added = 0;
  for (const auto& zone : c.zones)
    for (const auto& [type, count] : zone.gpus) {
      if (!config::is_on_demand_pool(type) || count <= 0) continue;
      s.columns.push_back({type, zone.name, "cluster " + c.name});
      for (auto& row : s.nodes) row.push_back(std::min(count, nodes_per_zone));
      ++added;
    }
  return added;
}

usage_dollars price_usage(const std::vector<gpu_usage>& usage, const config::gpu_catalog& catalog,
                          std::vector<std::string>* unpriced) {
  usage_dollars out;
  for (const auto& u : usage) {
    const auto* spec = catalog.find(u.gpu_type);
    if (!spec) {
      if (unpriced) unpriced->push_back(u.gpu_type);
      continue;
    }
    out.spot += u.gpu_hours * spec->spot_usd_per_hour;
    out.on_demand += u.gpu_hours * spec->on_demand_usd_per_hour;
  }
  return out;
}

}  // namespace sailor::planner
