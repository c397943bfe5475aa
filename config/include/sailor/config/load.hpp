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

result<cluster> load_cluster(const std::string& path);
result<model_shape> load_model(const std::string& path);
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

}  // namespace sailor::config
