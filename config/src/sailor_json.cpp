#include "sailor_json.hpp"

#include <fstream>

namespace sailor::config::sailor_json {

result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error::not_found(path, "", "cannot open file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    return error::invalid_input(path, "", std::string("not valid JSON: ") + e.what());
  }
}

int to_int(const std::string& key, const std::string& file, const std::string& field) {
  try {
    size_t used = 0;
    int v = std::stoi(key, &used);
    if (used == key.size()) return v;
  } catch (...) {
  }
  throw error::invalid_input(file, field, "expected an integer key, got '" + key + "'");
}

double number_at(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_number())
    throw error::invalid_input(file, field, "expected a number");
  return j.get<double>();
}

}  // namespace sailor::config::sailor_json
