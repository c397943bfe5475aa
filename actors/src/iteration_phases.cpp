#include "sailor/actors/iteration_phases.hpp"

#include <algorithm>
#include <map>

#include "sailor/simulator/correction.hpp"

namespace sailor::actors {

const std::vector<std::string>& iteration_phase_names() {
  static const std::vector<std::string> names{"data",       "forward_backward", "send_wait",
                                              "recv_wait",  "all_reduce",       "optimizer",
                                              "checkpoint", "bookkeeping"};
  return names;
}

phase_split median_phases(const std::vector<iteration_record>& records,
                          const std::set<std::int64_t>& warm_up) {
  const auto warm = [&warm_up](const iteration_record& r) { return warm_up.count(r.iteration) > 0; };
  const bool others = std::any_of(records.begin(), records.end(),
                                  [&warm](const iteration_record& r) { return !warm(r); });
  std::map<std::string, std::vector<double>> by_phase;
  std::vector<double> whole;
  for (const auto& r : records) {
    if (others && warm(r))
      continue;
    const std::pair<const char*, double> measured[] = {
      {"data", r.data_s},           {"forward_backward", r.compute_s},
      {"send_wait", r.send_wait_s}, {"recv_wait", r.recv_wait_s},
      {"all_reduce", r.all_reduce_s}, {"optimizer", r.optimizer_s},
      {"checkpoint", r.checkpoint_s}};
    double sum = 0;
    for (const auto& [name, s] : measured) {
      by_phase[name].push_back(s);
      sum += s;
    }
    by_phase["bookkeeping"].push_back(std::max(0.0, r.measured_s - sum));
    whole.push_back(r.measured_s);
  }
  phase_split out;
  for (const auto& name : iteration_phase_names())
    out.phases.emplace_back(name, simulator::median_of(by_phase[name]));
  out.iteration_s = simulator::median_of(whole);
  out.iterations = static_cast<int>(whole.size());
  return out;
}

}  // namespace sailor::actors
