#pragma once
/// The models shipped in configs/models/*.yaml, compiled into the library at build time: the
/// one source of every named model's shape. Sailor's data takes a model's shape from here
/// (Sailor's files describe some models wrongly), and the training tests and benches take
/// OPT-350M from here. The command line reads the same files from configs/models.

#include <optional>
#include <string>
#include <vector>

#include "sailor/config/model.hpp"

namespace sailor::config {

struct shipped_model {
  std::string file;  ///< where it lives in the source tree, e.g. configs/models/opt-350m.yaml
  model_shape shape;
};

/// Every shipped model, in file-name order. A shipped file that does not load is a build
/// defect: it aborts with the loader's message (config's unit tests load them all).
std::vector<shipped_model> shipped_models();

/// The shipped model whose `name`, `sailor_name` or file name (without .yaml) is `name`,
/// letters and digits compared and case ignored ("OPT-350M", "opt-350", "opt-350m").
std::optional<model_shape> find_shipped_model(const std::string& name);

/// The shipped model whose `sailor_name` is `sailor_name` (compared as above): the models of
/// Sailor's data (OPT-350, OPT-30, GPT-Neo-2.7, LLAMA-3-8).
std::optional<model_shape> find_shipped_sailor_model(const std::string& sailor_name);

/// Letters and digits of `name` in lower case: "OPT-350M" and "opt_350m" compare equal.
std::string normalized_name(const std::string& name);

}  // namespace sailor::config
