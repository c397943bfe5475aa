#pragma once
/// The closed loop's correction: what the live job measured against what the simulator
/// predicted, folded into one robust factor per GPU type (measured over predicted).
///
/// A sample is one iteration's measured time against the prediction of the plan it ran. The
/// factor of a type is the median ratio of its last `window` trusted samples: one slow
/// iteration (a page fault, a neighbour's burst) moves the median little, a lasting change
/// moves it within half a window. Untrusted, and dropped with the reason: non-finite, zero or
/// negative times, and ratios more than `max_peer_factor` times (or less than its inverse) the
/// median of the type's own samples or of the other types' factors.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/gpu.hpp"
#include "sailor/config/profile.hpp"

namespace sailor::simulator {

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
double median_of(std::vector<double> v);

struct correction_options {
  std::size_t window = 16;        ///< trusted samples kept per GPU type
  std::size_t min_samples = 3;    ///< fewer: the factor is 1 (the simulator is taken as is)
  double max_peer_factor = 1000;  ///< beyond this many times its peers, a sample is absurd
};

class speed_correction {
public:
  explicit speed_correction(correction_options o = {}) : options_(o) {}

  /// One iteration of `gpu_type`: returns "" when the sample was kept, else why it was not
  /// trusted (nothing changes then). `iteration`: which one (-1: not said), for forget_from.
  std::string add(const std::string& gpu_type, double predicted_s, double measured_s,
                  std::int64_t iteration = -1);
  /// Drops the samples of `gpu_type` from iteration `first` on (what they measured was not
  /// the type's: a node that slowed down before it was found out); returns how many.
  std::size_t forget_from(const std::string& gpu_type, std::int64_t first);

  /// Median of the trusted ratios of `gpu_type` (1 with fewer than `min_samples`).
  double factor(const std::string& gpu_type) const;
  /// Trusted samples held for `gpu_type`.
  std::size_t samples(const std::string& gpu_type) const;
  /// Samples refused so far (all types).
  std::size_t refused() const { return refused_; }
  /// The factor of every type with enough samples.
  std::map<std::string, double> factors() const;

  /// `p` with every time of each corrected GPU type multiplied by its factor (a slowed type,
  /// below, by its base type's).
  config::model_profile apply(config::model_profile p) const;

private:
  correction_options options_;
  struct sample {
    double ratio = 1;
    std::int64_t iteration = -1;
  };
  std::vector<double> ratios_of(const std::string& gpu_type) const;
  std::map<std::string, std::deque<sample>> ratios_;
  std::size_t refused_ = 0;
};

/// Links get the same robust factor, per zone pair: measured over predicted time of what
/// crosses it (the all-reduce of a stage whose replicas span the two zones). Its key.
std::string link_key(const std::string& zone_a, const std::string& zone_b);

/// `cluster` with each zone pair that `links` corrects (keys of link_key) taking its factor
/// times as long: latency times the factor, bandwidth (and its curve) divided by it. A pair
/// the cluster has no explicit link for gets one, from the defaults.
config::cluster corrected_links(config::cluster cluster, const speed_correction& links);

/// A device measured `factor` times slower than others of its type (a straggler) is planned
/// as a type of its own: the search then gives it the share its speed is worth (fewer layers,
/// fewer replicas) or leaves it out when that is faster. Its name: "BASE~slow" and the factor.
std::string slowed_type_name(const std::string& base, double factor);
/// The type a slowed type was made from ("" : `name` is no slowed type).
std::string slowed_base_type(const std::string& name);

/// Adds the slowed type `slowed_type_name(base, factor)` to `catalog` (the base type's entry
/// with its peak FLOP/s and memory bandwidth divided by `factor`) and, when `profile` times
/// the base type, to `profile` (every time multiplied by `factor`). Returns its name, or ""
/// when the catalog has no `base` or `factor` is not finite and over 1 (nothing added).
std::string add_slowed_type(const std::string& base, double factor, config::gpu_catalog& catalog,
                            config::model_profile* profile);

}  // namespace sailor::simulator
