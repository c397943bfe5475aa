#pragma once
// The model a subcommand works on, named either by a model YAML file or by Sailor's model name,
// with Sailor's data (profiles, network fits) when --sailor-data is given. Shared by `plan`
// and `simulate`.

#include <optional>
#include <string>

#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/sailor_format.hpp"

namespace sailor::app {

struct model_inputs {
  config::model_shape model;
  std::optional<config::sailor_data> data;  ///< loaded when --sailor-data was given
  config::job job;                          ///< Sailor's defaults, replaced by --job when given
};

/// `model` is a .yaml/.yml file or a Sailor model name (which needs `sailor_data`); `job` may
/// be empty.
result<model_inputs> load_model_inputs(const std::string& model, const std::string& sailor_data,
                                       const std::string& job);

}  // namespace sailor::app
