#include "safetensors_reader.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace sailor::train::detail {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Headers beyond this are not a model's (GPT-2 XL's is about 40 KB).
constexpr std::uint64_t max_header_bytes = 100ull << 20;
constexpr const char* index_name = "model.safetensors.index.json";

std::size_t any_dtype_bytes(const std::string& dtype) {
  if (auto n = float_dtype_bytes(dtype)) return n;
  if (dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

result<stored_tensor> parse_entry(const std::string& file, const std::string& name, const json& e,
                                  std::uint64_t data_start, std::uint64_t data_bytes) {
  auto bad = [&](const std::string& why) { return error::invalid_input(file, name, why); };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return bad("a header entry without dtype, shape and data_offsets");
  const json& d = e.at("dtype");
  const json& s = e.at("shape");
  const json& o = e.at("data_offsets");
  if (!d.is_string() || !s.is_array() || !o.is_array() || o.size() != 2)
    return bad("a malformed header entry: " + e.dump());
  stored_tensor t;
  t.name = name;
  t.file = file;
  t.dtype = d.get<std::string>();
  std::uint64_t elements = 1;
  for (const auto& dim : s) {
    if (!dim.is_number_unsigned() || dim.get<std::uint64_t>() > (1ull << 40))
      return bad("a malformed shape " + s.dump());
    t.shape.push_back(dim.get<std::int64_t>());
    elements *= dim.get<std::uint64_t>();
  }
  if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
    return bad("malformed data_offsets " + o.dump());
  const auto begin = o[0].get<std::uint64_t>(), end = o[1].get<std::uint64_t>();
  if (begin > end || end > data_bytes)
    return bad("its data_offsets " + o.dump() + " lie outside the file's " + std::to_string(data_bytes) +
               " bytes of data (a truncated file?)");
  if (const auto item = any_dtype_bytes(t.dtype); item > 0 && end - begin != elements * item)
    return bad("its data_offsets hold " + std::to_string(end - begin) + " bytes, its shape " + s.dump() +
               " of " + t.dtype + " needs " + std::to_string(elements * item));
  t.begin = data_start + begin;
  t.end = data_start + end;
  return t;
}

}  // namespace

std::size_t float_dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

result<safetensors_set> safetensors_set::open(const std::string& path) {
  safetensors_set set;
  set.path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir{path};
    if (fs::exists(dir / index_name, ec)) {
      if (auto st = set.add_index((dir / index_name).string())) return *st;
      return set;
    }
    if (fs::exists(dir / "model.safetensors", ec)) {
      if (auto st = set.add_file((dir / "model.safetensors").string())) return *st;
      return set;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors") found.push_back(entry.path().string());
    if (found.size() != 1)
      return error::not_found(path, "", found.empty() ? "no .safetensors file in this folder"
                                                      : "several .safetensors files and no " + std::string(index_name) +
                                                          " that says which tensor is where");
    if (auto st = set.add_file(found.front())) return *st;
    return set;
  }
  if (!fs::exists(path, ec)) return error::not_found(path, "", "no such file or folder");
  const bool index = path.size() >= 5 && path.ends_with(".json");
  if (auto st = index ? set.add_index(path) : set.add_file(path)) return *st;
  return set;
}

status safetensors_set::add_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return error::not_found(file, "", std::string("cannot read it: ") + std::strerror(errno));
  std::error_code ec;
  const std::uint64_t size = fs::file_size(file, ec);
  unsigned char length[8] = {};
  in.read(reinterpret_cast<char*>(length), 8);
  std::uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= static_cast<std::uint64_t>(length[i]) << (8 * i);
  if (!in || ec || size < 8) return error::invalid_input(file, "", "not a safetensors file: shorter than its 8-byte header length");
  if (header_bytes > max_header_bytes || header_bytes > size - 8)
    return error::invalid_input(file, "", "not a safetensors file, or a truncated one: its header would be " +
                                            std::to_string(header_bytes) + " bytes, the file has " +
                                            std::to_string(size) + " in all");
  std::string text(header_bytes, ' ');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  json header = json::parse(text, nullptr, false);
  if (!in || header.is_discarded() || !header.is_object())
    return error::invalid_input(file, "", "its header is not a JSON object (a truncated or damaged file)");
  const std::uint64_t data_start = 8 + header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    auto t = parse_entry(file, name, entry, data_start, size - data_start);
    if (!t) return t.error();
    if (tensors_.count(name)) return error::invalid_input(file, name, "also in " + tensors_.at(name).file);
    tensors_[name] = std::move(*t);
  }
  return {};
}

status safetensors_set::add_index(const std::string& index_file) {
  std::ifstream in(index_file);
  if (!in) return error::not_found(index_file, "", "cannot read it");
  json index = json::parse(in, nullptr, false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return error::invalid_input(index_file, "weight_map", "an index file needs a weight_map object (tensor -> file)");
  const fs::path dir = fs::path(index_file).parent_path();
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || fs::path(file.get<std::string>()).has_parent_path())
      return error::invalid_input(index_file, "weight_map." + name, "expected a file name beside the index");
    files.insert(file.get<std::string>());
  }
  for (const auto& f : files)
    if (auto st = add_file((dir / f).string())) return st;
  for (const auto& [name, file] : index["weight_map"].items()) {
    auto it = tensors_.find(name);
    if (it == tensors_.end() || fs::path(it->second.file).filename() != file.get<std::string>())
      return error::invalid_input(index_file, name, "the index places it in " + file.get<std::string>() +
                                                      ", which does not hold it");
  }
  return {};
}

const stored_tensor* safetensors_set::find(const std::string& name) const {
  if (auto it = tensors_.find(name); it != tensors_.end()) return &it->second;
  for (const char* prefix : {"transformer.", "model."})
    if (name.starts_with(prefix))
      if (auto it = tensors_.find(name.substr(std::strlen(prefix))); it != tensors_.end()) return &it->second;
  return nullptr;
}

result<std::vector<std::byte>> safetensors_set::read(const stored_tensor& t) const {
  std::ifstream in(t.file, std::ios::binary);
  if (!in) return error::not_found(t.file, t.name, std::string("cannot read the file: ") + std::strerror(errno));
  std::vector<std::byte> bytes(t.end - t.begin);
  in.seekg(static_cast<std::streamoff>(t.begin));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) return error::invalid_input(t.file, t.name, "the file ended before the tensor's bytes");
  return bytes;
}

}  // namespace sailor::train::detail
