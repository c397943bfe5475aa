#include "sailor/config/pools.hpp"

namespace sailor::config {

namespace {
constexpr std::string_view on_demand_suffix = "/on-demand";
constexpr std::string_view spot_suffix = "/spot";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

std::string pool_base_type(std::string_view name) {
  for (auto suffix : {on_demand_suffix, spot_suffix})
    if (ends_with(name, suffix)) return std::string(name.substr(0, name.size() - suffix.size()));
  return {};
}

bool is_on_demand_pool(std::string_view name) { return ends_with(name, on_demand_suffix); }

bool add_pool_type(std::string_view name, gpu_catalog& catalog) {
  const std::string base = pool_base_type(name);
  const gpu_spec* spec = base.empty() ? nullptr : catalog.find(base);
  if (!spec) return false;
  gpu_spec pool = *spec;
  pool.name = std::string(name);
  const double price = ends_with(name, on_demand_suffix) ? spec->on_demand_usd_per_hour : spec->spot_usd_per_hour;
  pool.on_demand_usd_per_hour = pool.spot_usd_per_hour = price;
  pool.source = (ends_with(name, on_demand_suffix) ? "on-demand pool of " : "spot pool of ") + base;
  catalog.upsert(std::move(pool));
  return true;
}

}  // namespace sailor::config
