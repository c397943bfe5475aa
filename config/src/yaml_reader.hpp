#pragma once
// Reading YAML (and JSON, which yaml-cpp parses too) with errors that name the file, the line
// and the field. Internally a failure is thrown as `load_failure` and turned into an error value
// at the load_* boundary; nothing outside config/ sees the exception.

#include <initializer_list>
#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

#include "enum_names.hpp"
#include "sailor/config/error.hpp"

namespace sailor::config::detail {

struct load_failure {
  sailor::error err;
};

class yaml_reader {
public:
  explicit yaml_reader(std::string file) : file_(std::move(file)) {}

  /// Parses the whole file; a syntax error names its line.
  YAML::Node parse() const;
  /// Parses `text` as the content of the file (for files compiled into the binary).
  YAML::Node parse_text(const std::string& text) const;

  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& field, const std::string& message,
                         error_kind kind = error_kind::invalid_input) const;

  /// Rejects keys not in `allowed` (catches typos).
  void only_keys(const YAML::Node& map, const std::string& field,
                 std::initializer_list<const char*> allowed) const;

  void expect_map(const YAML::Node& node, const std::string& field) const;
  void expect_sequence(const YAML::Node& node, const std::string& field) const;

  /// A required child of `parent`; a missing key names `path.key`.
  YAML::Node required(const YAML::Node& parent, const std::string& path, const char* key) const;

  std::string get_string(const YAML::Node& node, const std::string& field) const;
  double get_double(const YAML::Node& node, const std::string& field) const;
  long long get_int(const YAML::Node& node, const std::string& field) const;
  bool get_bool(const YAML::Node& node, const std::string& field) const;

  std::string req_string(const YAML::Node& parent, const std::string& path, const char* key) const;
  long long req_int(const YAML::Node& parent, const std::string& path, const char* key) const;
  double req_double(const YAML::Node& parent, const std::string& path, const char* key) const;

  std::optional<std::string> opt_string(const YAML::Node& parent, const std::string& path,
                                        const char* key) const;
  std::optional<long long> opt_int(const YAML::Node& parent, const std::string& path,
                                   const char* key) const;
  std::optional<double> opt_double(const YAML::Node& parent, const std::string& path,
                                   const char* key) const;
  std::optional<bool> opt_bool(const YAML::Node& parent, const std::string& path,
                               const char* key) const;
  /// An enum by its names (enum_names.hpp): another name fails, listing the names expected.
  template <class E, std::size_t N>
  std::optional<E> opt_enum(const YAML::Node& parent, const std::string& path, const char* key,
                            const enum_name<E> (&names)[N]) const;

  /// Non-negative (or positive) numbers, with a message that says which.
  long long req_count(const YAML::Node& parent, const std::string& path, const char* key,
                      bool positive) const;
  double req_nonneg(const YAML::Node& parent, const std::string& path, const char* key) const;

private:
  std::string file_;
};

std::string join_path(const std::string& path, const std::string& key);
std::string index_path(const std::string& path, std::size_t index);

template <class E, std::size_t N>
std::optional<E> yaml_reader::opt_enum(const YAML::Node& parent, const std::string& path,
                                       const char* key, const enum_name<E> (&names)[N]) const {
  auto name = opt_string(parent, path, key);
  if (!name) return std::nullopt;
  if (auto value = value_in(names, *name)) return value;
  fail(parent[key], join_path(path, key), "expected " + names_in(names) + ", found '" + *name + "'");
}

/// Runs a loader's body, turning a load_failure or a yaml-cpp exception into an error value.
template <class T, class F>
result<T> guarded(F&& body) {
  try {
    return body();
  } catch (const load_failure& f) {
    return f.err;
  } catch (const YAML::Exception& e) {
    return sailor::error::invalid_input("", e.what());
  }
}

}  // namespace sailor::config::detail
