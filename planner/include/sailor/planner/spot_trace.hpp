#pragma once
/// Availability traces: how many GPUs of each type each zone offers, tick by tick.
///
/// Two formats are read, and any number of files combine into one timeline:
/// - Sailor's CSV (`gpu_trace_*.csv`): a header `,Timestamp,GPU_zone,...`, then one row per
///   tick: an index, a Unix time in seconds (increasing) and a count per column.
/// - The JSON spot traces of skypilot-org/spot-traces: `{"metadata": {"gap_seconds": 300},
///   "data": [count per tick, ...]}`, one zone and GPU type per file. The zone and GPU type come
///   from `metadata.zone` / `metadata.gpu` when present, else from the file name
///   `<zone>_<gpu>_*.json` (`us-west-2a_v100_1.json`: zone us-west-2a, the catalog's V100 type).
///
/// A timeline is a step function: a tick's counts hold until the next tick starts. Combining
/// timelines takes the union of their change times over the span they all cover.

#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/planner/planner.hpp"

namespace sailor::planner {

/// One column of a timeline: GPUs of one type in one zone, and the file it came from.
struct trace_column {
  std::string gpu_type;
  std::string zone;
  std::string source;
};

struct availability_timeline {
  double tick_s = 0;                      ///< nominal tick length (the shortest of the parts)
  std::vector<trace_column> columns;
  std::vector<double> start_s;            ///< per tick: seconds since the first tick
  std::vector<std::vector<int>> counts;   ///< per tick, per column
  double end_s = 0;                       ///< end of the last tick
  std::vector<std::string> notes;         ///< what combining did (spans cut, ticks skipped)

  int ticks() const { return static_cast<int>(start_s.size()); }
  double duration_s(int tick) const;
  int total(int tick) const;
  /// The counts of a tick as the planner's availability (zero counts left out).
  availability at(int tick) const;
};

/// Sailor's CSV trace. The last tick lasts as long as the mean tick before it (60 s for a
/// one-row file). Errors name the file and the line (line = tick + 2).
result<availability_timeline> read_sailor_trace_csv(const std::string& path);

/// A JSON spot trace; GPU types are matched against `catalog` (`v100` -> `V100-16`).
result<availability_timeline> read_spot_trace_json(const std::string& path, const config::gpu_catalog& catalog);

/// Either format, by the file's extension (.csv or .json).
result<availability_timeline> read_trace(const std::string& path, const config::gpu_catalog& catalog);

/// One timeline from several, over the span all of them cover (notes say what was cut). The
/// same (GPU type, zone) in two parts is refused.
result<availability_timeline> combine(const std::vector<availability_timeline>& parts);

/// Every file in `paths` read and combined.
result<availability_timeline> read_traces(const std::vector<std::string>& paths, const config::gpu_catalog& catalog);

/// Refuses a timeline that names a GPU type the cluster's catalog lacks or a zone the cluster
/// lacks (when `require_zones`), or that has no GPU at its first tick. The message names the
/// file and the tick.
status check_timeline(const availability_timeline& t, const config::cluster& cluster, bool require_zones);

/// The timeline from its first tick with any GPU (times shifted to start at 0); `skipped` gets
/// the number of ticks left out. A timeline with no GPU at all is returned unchanged.
availability_timeline from_first_capacity(availability_timeline t, int* skipped = nullptr);

/// The cluster's pools of a type rented apart from the trace (`<type>/on-demand`, `<type>/spot`:
/// config/pools.hpp) added to the timeline as columns of constant count, one per (pool, zone),
/// so that plans may mix them with the trace's spot GPUs. Returns how many were added.
int add_pool_columns(availability_timeline& t, const config::cluster& cluster);

/// The cluster with a zone for every zone of the timeline (regions from the zone names) and
/// the catalog and links of `base`.
config::cluster cluster_for(const availability_timeline& t, config::cluster base);

}  // namespace sailor::planner
