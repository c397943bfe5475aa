#pragma once
// Helpers of the readers of Sailor's JSON files (sailor_format.cpp, sailor_plan.cpp,
// sailor_quotas.cpp): errors that name the file and field, numbers checked as they are read.

#include <string>

#include <nlohmann/json.hpp>

#include "sailor/config/error.hpp"

namespace sailor::config::sailor_json {

using json = nlohmann::json;

/// The file parsed, or why not (not found, not JSON).
result<json> read_json(const std::string& path);
/// `key` as an integer; throws an error naming file and field.
int to_int(const std::string& key, const std::string& file, const std::string& field);
/// `j` as a number; throws an error naming file and field.
double number_at(const json& j, const std::string& file, const std::string& field);

}  // namespace sailor::config::sailor_json
