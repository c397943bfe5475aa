#include "sailor_json.hpp"

#include <cctype>
#include <fstream>

namespace sailor::config::sailor_json {

sailor::error make_error(error_kind kind, std::string file, std::string field, std::string message) {
  sailor::error e;
  e.kind = kind;
  e.file = std::move(file);
  e.field = std::move(field);
  e.message = std::move(message);
  return e;
}

result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(error_kind::not_found, path, "", "cannot open file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    return make_error(error_kind::invalid_input, path, "", std::string("not valid JSON: ") + e.what());
  }
}

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
  return out;
}

int to_int(const std::string& key, const std::string& file, const std::string& field) {
  try {
    size_t used = 0;
    int v = std::stoi(key, &used);
    if (used == key.size()) return v;
  } catch (...) {
  }
  throw make_error(error_kind::invalid_input, file, field, "expected an integer key, got '" + key + "'");
}

double number_at(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_number())
    throw make_error(error_kind::invalid_input, file, field, "expected a number");
  return j.get<double>();
}

}  // namespace sailor::config::sailor_json
