#include "prediction_note.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sailor/simulator/correction.hpp"

namespace sailor::actors {
namespace {

using simulator::median_of;

bool usable(double s) { return std::isfinite(s) && s > 0; }

}  // namespace

prediction_status prediction_of_run(double predicted_s, std::int64_t start_iteration,
                                    const std::vector<iteration_record>& completed,
                                    std::size_t window) {
  prediction_status out;
  out.predicted_s = usable(predicted_s) ? predicted_s : 0;
  std::vector<double> now, before;
  // Newest first: the running plan's iterations after its first, then the previous plan's.
  for (auto it = completed.rbegin(); it != completed.rend(); ++it) {
    if (!usable(it->measured_s))
      continue;
    if (it->iteration > start_iteration) {
      if (now.size() < window)
        now.push_back(it->measured_s);
    } else if (it->iteration < start_iteration && before.size() < window) {
      before.push_back(it->measured_s);
    }
  }
  out.measured_s = median_of(now);
  if (out.predicted_s > 0 && out.measured_s > 0)
    out.ratio = out.measured_s / out.predicted_s;
  if (start_iteration > 0 && !before.empty()) {
    out.before_s = median_of(before);
    if (out.measured_s > 0)
      out.realised_gain = 1 - out.measured_s / out.before_s;
  }
  return out;
}

std::string prediction_text(const prediction_status& s) {
  std::string out;
  char buf[160];
  if (s.predicted_s > 0) {
    std::snprintf(buf, sizeof buf, "; predicted %.4f s per iteration", s.predicted_s);
    out += buf;
  }
  if (s.measured_s > 0) {
    std::snprintf(buf, sizeof buf, "%s measured %.4f s", out.empty() ? ";" : ",", s.measured_s);
    out += buf;
    if (s.ratio > 0) {
      std::snprintf(buf, sizeof buf, " (measured/predicted %.2f)", s.ratio);
      out += buf;
    }
  }
  if (s.before_s > 0 && s.measured_s > 0) {
    std::snprintf(buf, sizeof buf, "; last re-plan: %.4f -> %.4f s measured (realised gain %+.0f%%)",
                  s.before_s, s.measured_s, 100 * s.realised_gain);
    out += buf;
  }
  return out;
}

}  // namespace sailor::actors
