#include "recovery_summary.hpp"

#include <set>
#include <string>

namespace sailor::app {

void add_recovery_fields(nlohmann::json& j, const std::vector<actors::recovery_record>& records,
                         const std::vector<double>& recovery_s) {
  int lost = 0;
  std::int64_t bytes = 0;
  std::set<std::string> sources;
  auto splits = nlohmann::json::array();
  for (const auto& r : records) {
    lost += r.lost_iterations;
    bytes += r.bytes_restored;
    sources.insert(r.state_source);
    splits.push_back({{"cause", r.cause},
                      {"plan_version", r.plan_version},
                      {"start_iteration", r.start_iteration},
                      {"lost_iterations", r.lost_iterations},
                      {"state_source", r.state_source},
                      {"bytes_restored", r.bytes_restored},
                      {"planning_s", r.planning_s},
                      {"setup_s", r.setup_s},
                      {"restore_s", r.restore_s},
                      {"first_iteration_s", r.first_iteration_s},
                      {"total_s", r.total_s}});
  }
  j["lost_iterations"] = lost;
  j["recovery_s"] = recovery_s;
  if (sources.empty())
    j["state_source"] = nullptr;
  else
    j["state_source"] = sources.size() == 1 ? *sources.begin() : std::string{"mixed"};
  j["bytes_restored"] = bytes;
  j["recovery"] = std::move(splits);
}

}  // namespace sailor::app
