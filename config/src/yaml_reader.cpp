#include "yaml_reader.hpp"

#include <cstdint>
#include <limits>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sailor/config/text.hpp"

namespace sailor::config::detail {

namespace {
int line_of(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  auto mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

const char* type_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing";
  }
}
}  // namespace

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

YAML::Node yaml_reader::parse() const {
  std::error_code ec;
  if (!std::filesystem::exists(file_, ec)) {
    throw load_failure{error::not_found(file_, "", "file does not exist")};
  }
  std::ifstream in(file_);
  if (!in) throw load_failure{error::not_found(file_, "", "cannot open file for reading")};
  std::stringstream text;
  text << in.rdbuf();
  return parse_text(text.str());
}

YAML::Node yaml_reader::parse_text(const std::string& text) const {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw load_failure{error::invalid_input(file_, "", "file is empty")};
  }
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) {
      throw load_failure{error::invalid_input(file_, "", std::string("expected a map of fields at the top level, found ") +
                                              type_name(root))
                             .at_line(line_of(root))};
    }
    return root;
  } catch (const YAML::ParserException& e) {
    throw load_failure{
        error::invalid_input(file_, "", "syntax error: " + e.msg).at_line(e.mark.line >= 0 ? e.mark.line + 1 : 0)};
  }
}

void yaml_reader::fail(const YAML::Node& at, const std::string& field, const std::string& message,
                       error_kind kind) const {
  throw load_failure{error::of(kind, file_, field, message).at_line(line_of(at))};
}

void yaml_reader::only_keys(const YAML::Node& map, const std::string& field,
                            std::initializer_list<const char*> allowed) const {
  for (const auto& kv : map) {
    auto key = kv.first.as<std::string>();
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      const std::string near = closest_name(key, allowed);
      fail(kv.first, join_path(field, key),
           "unknown field" + (near.empty() ? std::string() : " (did you mean '" + near + "'?)") +
               "; expected one of: " + list);
    }
  }
}

void yaml_reader::expect_map(const YAML::Node& node, const std::string& field) const {
  if (!node.IsMap()) fail(node, field, std::string("expected a map, found ") + type_name(node));
}

void yaml_reader::expect_sequence(const YAML::Node& node, const std::string& field) const {
  if (!node.IsSequence()) fail(node, field, std::string("expected a list, found ") + type_name(node));
}

YAML::Node yaml_reader::required(const YAML::Node& parent, const std::string& path,
                                 const char* key) const {
  YAML::Node child = parent[key];
  if (!child.IsDefined() || child.IsNull()) fail(parent, join_path(path, key), "missing required field");
  return child;
}

std::string yaml_reader::get_string(const YAML::Node& node, const std::string& field) const {
  if (!node.IsScalar()) fail(node, field, std::string("expected a string, found ") + type_name(node));
  return node.Scalar();
}

double yaml_reader::get_double(const YAML::Node& node, const std::string& field) const {
  if (!node.IsScalar()) fail(node, field, std::string("expected a number, found ") + type_name(node));
  try {
    std::size_t used = 0;
    double v = std::stod(node.Scalar(), &used);
    if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    fail(node, field, "expected a number, found '" + node.Scalar() + "'");
  }
}

long long yaml_reader::get_int(const YAML::Node& node, const std::string& field) const {
  if (!node.IsScalar()) fail(node, field, std::string("expected an integer, found ") + type_name(node));
  try {
    std::size_t used = 0;
    long long v = std::stoll(node.Scalar(), &used);
    if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    fail(node, field, "expected an integer, found '" + node.Scalar() + "'");
  }
}

bool yaml_reader::get_bool(const YAML::Node& node, const std::string& field) const {
  if (node.IsScalar()) {
    const auto& s = node.Scalar();
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail(node, field, "expected true or false");
}

std::string yaml_reader::req_string(const YAML::Node& parent, const std::string& path,
                                    const char* key) const {
  return get_string(required(parent, path, key), join_path(path, key));
}

long long yaml_reader::req_int(const YAML::Node& parent, const std::string& path,
                               const char* key) const {
  return get_int(required(parent, path, key), join_path(path, key));
}

double yaml_reader::req_double(const YAML::Node& parent, const std::string& path,
                               const char* key) const {
  return get_double(required(parent, path, key), join_path(path, key));
}

std::optional<std::string> yaml_reader::opt_string(const YAML::Node& parent,
                                                   const std::string& path, const char* key) const {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return get_string(n, join_path(path, key));
}

std::optional<long long> yaml_reader::opt_int(const YAML::Node& parent, const std::string& path,
                                              const char* key) const {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return get_int(n, join_path(path, key));
}

std::optional<double> yaml_reader::opt_double(const YAML::Node& parent, const std::string& path,
                                              const char* key) const {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return get_double(n, join_path(path, key));
}

std::optional<bool> yaml_reader::opt_bool(const YAML::Node& parent, const std::string& path,
                                          const char* key) const {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return get_bool(n, join_path(path, key));
}

long long yaml_reader::req_count(const YAML::Node& parent, const std::string& path, const char* key,
                                 bool positive) const {
  YAML::Node n = required(parent, path, key);
  long long v = get_int(n, join_path(path, key));
  if (positive && v <= 0) fail(n, join_path(path, key), "expected a positive integer, found " + std::to_string(v));
  if (!positive && v < 0) fail(n, join_path(path, key), "expected a non-negative integer, found " + std::to_string(v));
  // Counts are held in 32 bits: a larger one must not wrap around silently.
  if (v > std::numeric_limits<std::int32_t>::max())
    fail(n, join_path(path, key), "expected at most " + std::to_string(std::numeric_limits<std::int32_t>::max()) +
                                      ", found " + std::to_string(v));
  return v;
}

double yaml_reader::req_nonneg(const YAML::Node& parent, const std::string& path,
                               const char* key) const {
  YAML::Node n = required(parent, path, key);
  double v = get_double(n, join_path(path, key));
  if (v < 0) fail(n, join_path(path, key), "expected a non-negative number");
  return v;
}

}  // namespace sailor::config::detail
