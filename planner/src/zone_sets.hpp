#pragma once
// The zone sets the search visits, pruned by region and bandwidth before any is searched (a
// cloud lists well over a hundred zones; the sets searched grow with the logarithm of the
// regions, not with them).

#include <vector>

#include "search_space.hpp"

namespace sailor::planner::detail {

/// The zone sets to search, the first being all zones, each in placement order (most GPUs
/// first, ties by name) and none twice. With `options::zone_subsets` (and more than one zone)
/// also: the two largest zones alone; the largest multi-zone regions alone (the three with
/// most GPUs, and the one with most of each GPU type); and regions added outwards from the
/// largest in order of bandwidth (ties: capacity) at 2, 3, 4, 6, 9, 13, ... regions.
std::vector<zone_set> make_zone_sets(const search_space& space);

}  // namespace sailor::planner::detail
