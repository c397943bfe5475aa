#pragma once
// Loading a Hugging Face checkpoint (safetensors_reader.hpp) into a stage module (private to
// train/, LibTorch): this rank's slice of each of its parameters, named as hf_names.hpp says,
// converted to fp32, transposed and split where the family stores it otherwise, cut to the
// rank's TP slice. Everything is read and checked before the module is changed.

#include <cstdint>
#include <set>
#include <string>

#include <sailor/config/error.hpp>
#include <sailor/models/gpt.hpp>

#include "safetensors_reader.hpp"

namespace sailor::train::detail {

struct import_counts {
  int tensors = 0;          ///< parameters of the module filled
  std::int64_t bytes = 0;   ///< bytes read from the files
  std::set<std::string> used;  ///< the file's tensors read (their names there)
};

/// Fills `module`'s parameters from `set`. An error names the file and the tensor: missing,
/// of another shape than `module`'s model needs (expected and found), a dtype that is not a
/// float, or a value that is not finite.
result<import_counts> import_into(models::stage_module& module, const safetensors_set& set);

}  // namespace sailor::train::detail
