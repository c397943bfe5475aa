#pragma once
// The model a subcommand works on, named by a model YAML file or by name, with Sailor's data
// (profiles, network fits) when --sailor-data is given and a profile written by `sailor
// profile` when --profile is. Shared by `plan` and `simulate`.
//
// One registry of models: a name is looked up in Sailor's data (when given), then among the
// shipped model files (configs/models/*.yaml) by their `name` or `sailor_name`, so that
// `--model OPT-350M`, `--model opt-350` and `--model configs/models/opt-350m.yaml` all work.

#include <optional>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/config/sailor_format.hpp"

namespace sailor::app {

struct model_request {
  std::string model;        ///< a .yaml/.yml file or a model name (required)
  std::string sailor_data;  ///< a Sailor data folder (may be empty)
  std::string job;          ///< a job YAML file (may be empty)
  std::string profile;      ///< a profile JSON file of `sailor profile` (may be empty)
};

struct model_inputs {
  config::model_shape model;
  std::string model_file;                   ///< the YAML it came from ("" for Sailor's data)
  std::optional<config::sailor_data> data;  ///< loaded when --sailor-data was given
  config::model_profile profile;            ///< Sailor's profiles with --profile's on top
  bool has_profile = false;                 ///< any profile at all
  config::job job;                          ///< Sailor's defaults, replaced by --job when given
};

result<model_inputs> load_model_inputs(const model_request& request);

/// The shipped model file whose `name` or `sailor_name` is `name` (letters and digits compared,
/// case ignored), or "" with the known names in `known`.
std::string find_model_file(const std::string& name, std::vector<std::string>* known = nullptr);

}  // namespace sailor::app
