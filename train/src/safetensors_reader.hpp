#pragma once
// Reading Hugging Face checkpoints (private to train/, no LibTorch): one safetensors file, or
// a folder holding model.safetensors or the shards of model.safetensors.index.json. Only
// headers are read when opened; each tensor's bytes when asked for, by its offsets.
//
// A safetensors file is a u64 little-endian header length, a JSON header (tensor name ->
// dtype, shape, data_offsets relative to the end of the header; "__metadata__" aside), then
// the tensors' bytes. Every header is checked whole on open: a truncated file, an offset past
// the end, or a size that disagrees with dtype x shape is refused, naming file and tensor.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <sailor/config/error.hpp>

namespace sailor::train::detail {

struct stored_tensor {
  std::string name;
  std::string file;   ///< the safetensors file that holds it
  std::string dtype;  ///< as written: F32, F16, BF16, F64, I64, ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< absolute offsets in `file`
  std::uint64_t end = 0;
};

/// Bytes per element of a safetensors dtype; 0 for a dtype this reader does not convert.
std::size_t float_dtype_bytes(const std::string& dtype);

class safetensors_set {
public:
  /// Opens `path`: a .safetensors file, a model.safetensors.index.json, or a folder with
  /// either (or a single .safetensors file) in it.
  static result<safetensors_set> open(const std::string& path);

  /// The tensor named `name`, or null. Also found without the family's outer prefix
  /// ("transformer.", "model.") that some exports leave out (GPT-2's own files do).
  const stored_tensor* find(const std::string& name) const;
  const std::map<std::string, stored_tensor>& tensors() const { return tensors_; }
  /// The raw bytes of `t` (end - begin of them).
  result<std::vector<std::byte>> read(const stored_tensor& t) const;
  /// What open() was given, for messages.
  const std::string& path() const { return path_; }

private:
  status add_file(const std::string& file);
  status add_index(const std::string& index_file);

  std::string path_;
  std::map<std::string, stored_tensor> tensors_;
};

}  // namespace sailor::train::detail
