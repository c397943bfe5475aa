#pragma once
/// Loading configs from files. YAML is for people; JSON (a subset of YAML) is accepted too.
/// Every error names the file, the line where known, the field and what was expected, and
/// nothing is written on failure.

#include <string>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::config {

/// The kind of config a file holds, "cluster", "model", "job" or "plan", told by its
/// top-level fields (a misspelt field counts for the kind that has it spelt right). Errors: the
/// file does not exist (not_found), is not YAML, or has no field of any kind.
result<std::string> config_kind(const std::string& path);

result<cluster> load_cluster(const std::string& path);
result<model_shape> load_model(const std::string& path);
/// A model file's content, read as load_model reads the file; errors name `file`.
result<model_shape> load_model_text(const std::string& text, const std::string& file);
result<job> load_job(const std::string& path);
/// Loads a plan and checks it against the model: layers cover the model exactly once.
result<plan> load_plan(const std::string& path, const model_shape& model);
/// Loads a plan without checking it against a model.
result<plan> load_plan(const std::string& path);

/// Checks a plan against a model and cluster (layer coverage, known GPU types and zones, TP
/// degrees that fit a node). The cluster may be null.
status validate_plan(const plan& p, const model_shape& model, const cluster* c,
                     const std::string& file = "");

/// Writes a plan as YAML (the format load_plan reads).
std::string to_yaml(const plan& p);

/// What a plan was made for: the inputs `sailor plan` was given, recorded in the plan file
/// (`made_for:`) so that `sailor simulate --plan P.yaml` needs nothing else. Empty fields were
/// not given. Paths are as absolute as they were when the plan was written.
struct plan_origin {
  std::string model;        ///< a model YAML file or a model name
  std::string cluster;      ///< a cluster YAML file
  std::string job;          ///< a job YAML file
  std::string sailor_data;  ///< a Sailor data folder
  std::string quotas;       ///< Sailor's quotas file (instead of a cluster)
  std::string profile;      ///< a profile file written by `sailor profile`
  bool empty() const {
    return model.empty() && cluster.empty() && job.empty() && sailor_data.empty() &&
           quotas.empty() && profile.empty();
  }
};

/// The `made_for:` of a plan file (all empty when the file has none).
result<plan_origin> load_plan_origin(const std::string& path);

/// `made_for:` as YAML, to append to to_yaml(plan).
std::string to_yaml(const plan_origin& origin);

}  // namespace sailor::config
