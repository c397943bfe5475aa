#pragma once
/// Reading (and writing) the files of a Sailor checkout, for interop: the layout of
/// ../shared/data/sailor (see its README). Errors name the file and the field.

#include <map>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/profile.hpp"

namespace sailor::config {

/// Sailor's quadratic bandwidth fit: GB/s = a*x^2 + b*x + c with x = log2(bytes / 1e6),
/// capped at max_gbytes_per_s.
struct sailor_bandwidth_fit {
  double a = 0, b = 0, c = 0;
  double max_gbytes_per_s = 0;
  double gbytes_per_s(double bytes) const;
};

/// Sailor's network fits between (zone, GPU type, GPUs used per node) endpoints.
struct sailor_network {
  struct endpoint {
    std::string zone;
    std::string gpu_type;
    int gpus_per_node = 0;
    auto operator<=>(const endpoint&) const = default;
  };
  std::map<std::pair<endpoint, endpoint>, sailor_bandwidth_fit> fits;
  /// Egress $/GB between zones (communication_cost.json).
  std::map<std::pair<std::string, std::string>, double> egress_usd_per_gb;
  /// Inside one node: (GPU type, GPUs used) -> fit (intra_node_bandwidths.json).
  std::map<std::pair<std::string, int>, sailor_bandwidth_fit> intra_node;

  /// The fit between two endpoints, or null.
  const sailor_bandwidth_fit* find(const endpoint& a, const endpoint& b) const;
};

/// Everything read from one Sailor data directory for one model.
struct sailor_data {
  std::string root;                 ///< the directory given
  model_shape model;                ///< from training_config_<model>.json
  int default_global_batch = 0;     ///< its global_batch_size
  optimizer_kind optimizer = optimizer_kind::adam;
  model_profile profile;            ///< profiles_tmp.json and llm_info.json
  sailor_network network;           ///< multizone_bandwidths_het.json + communication_cost.json
  gpu_catalog gpus;                 ///< built-in catalog updated by basic_cluster_config.json
};

/// Reads a Sailor checkout (or a folder with its layout) for model `name` (OPT-350,
/// GPT-Neo-2.7, LLAMA-3-8, OPT-30). A model the checkout has no training config for takes
/// `shape` when given (a model YAML's full shape: its profiles, if any, are still read, and the
/// network, prices and catalog are the checkout's); without `shape` it is an error.
result<sailor_data> load_sailor_data(const std::string& root, const std::string& model_name,
                                     const model_shape* shape = nullptr);

/// Reads a Sailor plan_config JSON file. Also returns the measured "real" iteration time and
/// "max_mem" when present (0 otherwise).
struct sailor_plan_file {
  plan value;
  double measured_iteration_s = 0;
  double measured_peak_memory_bytes = 0;
};
result<sailor_plan_file> load_sailor_plan(const std::string& path);

/// Writes a plan in Sailor's plan_config format (JSON text).
std::string to_sailor_plan_json(const plan& p);

/// Reads a quotas file: {gpu_type: {zone: count}}.
result<std::map<std::string, std::map<std::string, int>>> load_sailor_quotas(const std::string& path);

/// Checks that every GPU type of `quotas` (read from `file`) is in `data`'s catalog and every
/// zone is one `data`'s network knows (a bandwidth fit or an egress price names it): a type
/// or zone the data lacks would otherwise be dropped from the pool without a word.
status check_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                    const sailor_data& data, const std::string& file);

/// A cluster built from quotas and Sailor's network and prices (zones named like GCP's,
/// regions taken from the zone name without its last `-x`).
cluster cluster_from_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                            const sailor_data& data);

}  // namespace sailor::config
