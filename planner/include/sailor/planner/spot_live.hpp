#pragma once
/// The script of a live spot replay (`sailor replay --live`): a slice of an availability
/// timeline turned into local nodes to start and stop, tick by tick, and the dollars of the
/// GPU-hours the nodes ran.
///
/// Each column of the timeline (one GPU type in one zone) becomes one emulated zone holding
/// min(count, nodes_per_zone) nodes: one node per unit of capacity, capped. A fall stops the
/// newest nodes of the column, each with notice (SIGTERM, a grace period) or, for a share
/// `kill_fraction` of them chosen by a generator seeded with `seed`, without (SIGKILL); a rise
/// starts new ones.

#include <cstdint>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/gpu.hpp"
#include "sailor/planner/spot_trace.hpp"

namespace sailor::planner {

struct live_slice_options {
  int from_tick = 0;
  int to_tick = -1;  ///< first tick left out; -1: through the last tick
  int nodes_per_zone = 2;
  double kill_fraction = 0;  ///< share of the stops without notice, 0 to 1
  std::uint64_t seed = 1;
};

/// The change of one column at one tick.
struct live_change {
  int tick = 0;      ///< of the slice (0 is its first)
  double at_s = 0;   ///< trace seconds since the slice's start
  int column = 0;
  int delta = 0;     ///< nodes to start (> 0) or to stop (< 0)
  int without_notice = 0;  ///< of the stops, how many get no notice
};

struct live_script {
  std::vector<trace_column> columns;
  std::vector<double> start_s;          ///< per tick: trace seconds since the slice's start
  std::vector<std::vector<int>> nodes;  ///< per tick, per column: min(count, nodes_per_zone)
  double end_s = 0;                     ///< the slice's span
  int from_tick = 0;                    ///< of the timeline
  std::vector<live_change> changes;     ///< at ticks after the first, in order
  int stops = 0, stops_without_notice = 0, starts = 0;

  int initial_nodes() const;
  /// The tick running at trace second `s` (the last one past the end).
  int tick_at(double s) const;
};

/// The script of a slice. Bad options name the option (--from, --to, --nodes-per-zone,
/// --kill-fraction); a slice with no node at its first tick names the trace files and the tick.
result<live_script> make_live_script(const availability_timeline& t, const live_slice_options& o);

/// Mixed pools (issue 18, item 6): the cluster's on-demand pools (`<type>/on-demand` in a zone's
/// `gpus:`, config/pools.hpp) become columns of their own after the trace's, which no change
/// touches: min(count, nodes_per_zone) nodes from the slice's start to its end, priced at the
/// pool's on-demand price. Returns how many columns were added.
int add_on_demand_pools(live_script& s, const config::cluster& c, int nodes_per_zone);

/// GPU-hours one column's nodes ran.
struct gpu_usage {
  std::string gpu_type, zone;
  double gpu_hours = 0;
};

struct usage_dollars {
  double spot = 0, on_demand = 0;
};

/// The dollars of `usage` at the catalog's spot and on-demand prices per GPU-hour (a type the
/// catalog lacks costs nothing and is named in `unpriced`).
usage_dollars price_usage(const std::vector<gpu_usage>& usage, const config::gpu_catalog& catalog,
                          std::vector<std::string>* unpriced = nullptr);

}  // namespace sailor::planner
