#pragma once
/// A cluster: regions, zones, GPUs available per type and zone, and the links between zones.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sailor/config/gpu.hpp"

namespace sailor::config {

/// Bandwidth as a function of message size: points (bytes, GB/s), interpolated linearly in
/// log2(bytes) and held constant outside the first and last point.
struct bandwidth_curve {
  std::vector<std::pair<double, double>> points;
  double at(double bytes) const;
};

/// A directed link between two zones (or a zone and itself: the network inside the zone).
struct zone_link {
  std::string from;
  std::string to;
  double latency_s = 0;
  double bandwidth_gbytes_per_s = 0;     ///< sustained, for large transfers
  std::optional<bandwidth_curve> curve;  ///< if present, overrides the constant by size
  double egress_usd_per_gb = 0;

  /// Effective bandwidth (bytes/s) for a transfer of `bytes`.
  double bytes_per_s(double bytes) const;
  /// Seconds to move `bytes` over this link: latency + bytes / bandwidth.
  double transfer_s(double bytes) const;
};

/// The region of a zone named as the clouds name them (`us-central1-a` -> `us-central1`): the
/// name without its last `-x`; a name without a dash is its own region.
std::string region_of_zone(std::string_view zone);

struct zone {
  std::string name;
  std::string region;
  std::map<std::string, int> gpus;  ///< GPU type -> GPUs available
};

struct region {
  std::string name;
  std::vector<std::string> zones;
};

/// Defaults for links not listed, by relation of the two zones.
struct link_defaults {
  zone_link same_zone{"", "", 10e-6, 12.5, std::nullopt, 0.0};
  zone_link same_region{"", "", 1e-3, 6.0, std::nullopt, 0.01};
  zone_link cross_region{"", "", 30e-3, 1.0, std::nullopt, 0.02};
};

struct cluster {
  std::string name;
  std::vector<region> regions;
  std::vector<zone> zones;
  std::vector<zone_link> links;  ///< explicit links; both directions when `symmetric`
  link_defaults defaults;
  gpu_catalog gpus = gpu_catalog::builtin();
  bool use_spot_prices = false;

  const zone* find_zone(std::string_view name) const;
  /// The zone `name`; when the cluster has none, a new one without GPUs, in the region its name
  /// implies (region_of_zone), which is added too when the cluster lacks it.
  zone& add_zone(std::string_view name);
  /// The link from `a` to `b`: the explicit one if listed (in either direction), otherwise the
  /// default for their relation. Both zones must exist.
  zone_link link(std::string_view a, std::string_view b) const;
  /// $/hour of one GPU of `type`, on-demand or spot as configured; 0 if unknown.
  double usd_per_gpu_hour(std::string_view type) const;
  int total_gpus() const;
};

}  // namespace sailor::config
