#pragma once
// The closed form of a complete plan, on tables already built.

#include "tables.hpp"

namespace sailor::planner::detail {

result<estimate> estimate_with(const problem& prob, const tables& tab, const network& net,
                               const config::plan& p);

}  // namespace sailor::planner::detail
