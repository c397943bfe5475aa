#include "recovery_summary.hpp"

#include <set>
#include <string>

namespace sailor::actors {

// One recovery's split, every field under its own name (`recovery` of the run summary).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(recovery_record, cause, plan_version, start_iteration,
                                   lost_iterations, state_source, bytes_restored, planning_s,
                                   setup_s, restore_s, first_iteration_s, total_s)

}  // namespace sailor::actors

namespace sailor::app {

void add_recovery_fields(nlohmann::json& j, const std::vector<actors::recovery_record>& records,
                         const std::vector<double>& recovery_s) {
  int lost = 0;
  std::int64_t bytes = 0;
  std::set<std::string> sources;
  for (const auto& r : records) {
    lost += r.lost_iterations;
    bytes += r.bytes_restored;
    sources.insert(r.state_source);
  }
  j["lost_iterations"] = lost;
  j["recovery_s"] = recovery_s;
  if (sources.empty())
    j["state_source"] = nullptr;
  else
    j["state_source"] = sources.size() == 1 ? *sources.begin() : std::string{"mixed"};
  j["bytes_restored"] = bytes;
  j["recovery"] = records;
}

}  // namespace sailor::app
