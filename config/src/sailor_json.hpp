#pragma once
// Helpers of the readers of Sailor's JSON files (sailor_format.cpp, sailor_plan.cpp,
// sailor_quotas.cpp): errors that name the file and field, numbers checked as they are read.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sailor/config/error.hpp"

namespace sailor::config::sailor_json {

using json = nlohmann::json;

sailor::error make_error(error_kind kind, std::string file, std::string field, std::string message);
/// The file parsed, or why not (not found, not JSON).
result<json> read_json(const std::string& path);
/// Lower case, letters and digits only: "OPT-350" and "opt_350" compare equal.
std::string normalized(std::string_view s);
/// `key` as an integer; throws an error naming file and field.
int to_int(const std::string& key, const std::string& file, const std::string& field);
/// `j` as a number; throws an error naming file and field.
double number_at(const json& j, const std::string& file, const std::string& field);

}  // namespace sailor::config::sailor_json
