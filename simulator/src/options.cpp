#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "sailor/simulator/simulator.hpp"

namespace sailor::simulator {

namespace {
struct entry {
  const char* name;
  double sim_options::*number;
  bool sim_options::*flag;
};
const entry entries[] = {
    {"compute_scale", &sim_options::compute_scale, nullptr},
    {"analytic_efficiency", &sim_options::analytic_efficiency, nullptr},
    {"p2p_latency_s", &sim_options::p2p_latency_s, nullptr},
    {"collective_latency_s", &sim_options::collective_latency_s, nullptr},
    {"bucket_bytes", &sim_options::bucket_bytes, nullptr},
    {"grad_bytes_per_param", &sim_options::grad_bytes_per_param, nullptr},
    {"overlap_p2p", nullptr, &sim_options::overlap_p2p},
    {"receiver_blocks", nullptr, &sim_options::receiver_blocks},
    {"p2p_partitioned", nullptr, &sim_options::p2p_partitioned},
    {"hierarchical_allreduce", nullptr, &sim_options::hierarchical_allreduce},
    {"profile_layer_overhead_s", &sim_options::profile_layer_overhead_s, nullptr},
    {"profile_smoothing_octaves", &sim_options::profile_smoothing_octaves, nullptr},
    {"network_efficiency", &sim_options::network_efficiency, nullptr},
    {"job_gbytes_per_s_per_gpu", &sim_options::job_gbytes_per_s_per_gpu, nullptr},
    {"framework_overhead_bytes", &sim_options::framework_overhead_bytes, nullptr},
    {"activation_peak_factor", &sim_options::activation_peak_factor, nullptr},
    {"sailor_memory_check", nullptr, &sim_options::sailor_memory_check},
    {"sailor_bytes_per_param", &sim_options::sailor_bytes_per_param, nullptr},
    {"sailor_framework_bytes", &sim_options::sailor_framework_bytes, nullptr},
    {"mixed_grad_memory_bytes_per_param", &sim_options::mixed_grad_memory_bytes_per_param, nullptr},
    {"int8_block_values", &sim_options::int8_block_values, nullptr},
    {"outer_state_bytes_per_param", &sim_options::outer_state_bytes_per_param, nullptr},
    {"optimizer_bytes_per_param", &sim_options::optimizer_bytes_per_param, nullptr},
    {"memory_bandwidth_efficiency", &sim_options::memory_bandwidth_efficiency, nullptr},
    {"allreduce_per_layer", nullptr, &sim_options::allreduce_per_layer},
    {"final_allreduce", nullptr, &sim_options::final_allreduce},
    {"host_cores", &sim_options::host_cores, nullptr},
    {"cpu_per_message_s", &sim_options::cpu_per_message_s, nullptr},
    {"cpu_per_collective_s", &sim_options::cpu_per_collective_s, nullptr},
};
}  // namespace

status set_option(sim_options& o, const std::string& key, double value) {
  for (const auto& e : entries) {
    if (key != e.name) continue;
    if (e.number) o.*(e.number) = value;
    else o.*(e.flag) = value != 0;
    return std::nullopt;
  }
  std::string known;
  for (const auto& e : entries) known += std::string(known.empty() ? "" : ", ") + e.name;
  return sailor::error::invalid_input(key, "unknown simulator option (known: " + known + ")");
}

status set_options(sim_options& o, const std::string& list) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos)
      return sailor::error::invalid_input(item, "expected key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0')
      return sailor::error::invalid_input(key, "expected a number, got '" + value + "'");
    if (auto err = set_option(o, key, v)) return err;
  }
  return std::nullopt;
}

std::string describe(const sim_options& o) {
  std::string out;
  char buf[128];
  for (const auto& e : entries) {
    if (e.number) std::snprintf(buf, sizeof buf, "%s=%g\n", e.name, o.*(e.number));
    else std::snprintf(buf, sizeof buf, "%s=%d\n", e.name, o.*(e.flag) ? 1 : 0);
    out += buf;
  }
  return out;
}

}  // namespace sailor::simulator
