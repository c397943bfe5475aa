#pragma once
/// Mixed pools (issue 18, item 6): one GPU type rented both as spot and as on-demand in a
/// cluster. A zone's `gpus:` may name `<type>/on-demand` or `<type>/spot` beside `<type>`: a pool
/// of the catalog's `<type>` (the same hardware, profiled as it is) priced always at its
/// on-demand (or spot) price, whatever the cluster's `pricing`. The planner sees each pool as a
/// GPU type of its own, so it may mix them (an on-demand anchor among spot replicas), and every
/// estimate prices each pool at its own price.
#include <string>
#include <string_view>

#include "sailor/config/gpu.hpp"

namespace sailor::config {

/// The catalog type a pool type is of: `V100-16/on-demand` -> `V100-16` ("" : no pool type).
std::string pool_base_type(std::string_view name);

/// Whether `name` is an on-demand pool type (`<type>/on-demand`): capacity no trace takes away.
bool is_on_demand_pool(std::string_view name);

/// Adds the pool type `name` to `catalog` when its base type is there: a copy of the base with
/// both prices set to the pool's. Returns false (and changes nothing) when `name` is no pool
/// type or the catalog lacks its base.
bool add_pool_type(std::string_view name, gpu_catalog& catalog);

}  // namespace sailor::config
