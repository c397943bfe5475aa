#pragma once
// The JSON of a cluster status, one for `sailor status --json` and the dashboard's /api/status.

#include <nlohmann/json.hpp>

#include "sailor/actors/messages.hpp"

namespace sailor::app {

nlohmann::json status_json(const actors::cluster_status& s);

}  // namespace sailor::app
