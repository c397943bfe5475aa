#include "sailor/simulator/host_profile.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "sailor/config/load.hpp"

namespace sailor::simulator {

sim_options cpu_sim_options(const measured_profile* profile) {
  sim_options sim;
  sim.framework_overhead_bytes = 0;
  sim.overlap_p2p = true;
  sim.p2p_partitioned = false;
  if (!profile)
    return sim;
  // The profile times each layer as the executor runs it: nothing to remove per layer. Our
  // runtime all-reduces gradients per layer, then the loss and norm over every rank; the
  // ranks are processes of this machine and share its cores.
  sim.profile_layer_overhead_s = 0;
  sim.allreduce_per_layer = true;
  sim.final_allreduce = true;
  sim.host_cores = profile->host_cores;
  sim.cpu_per_message_s = profile->cpu_per_message_s;
  sim.cpu_per_collective_s = profile->cpu_per_collective_s;
  // Plans of another count of ranks than measured the profile: their CPU work at their count.
  sim.host_cpu_scale = profile->cpu_work_by_ranks;
  return sim;
}

double pass_work(const config::model_profile& p, const std::string& type, int mbs) {
  const auto* gp = p.find(type);
  const auto* layers = gp ? gp->find(mbs, 1) : nullptr;
  double out = 0;
  if (layers)
    for (const auto& l : *layers)
      out += l.forward_s + l.backward_s + l.update_s;
  return out;
}

void add_host_model(measured_profile& m, const std::vector<measured_profile>& others, const std::string& type,
                    int mbs) {
  m.cpu_work_by_ranks = {{m.ranks, 1.0}};
  const double own = pass_work(m.profile, type, mbs);
  if (!(own > 0))
    return;
  for (const auto& other : others) {
    if (other.ranks == m.ranks || other.ranks <= 0)
      continue;
    if (const double work = pass_work(other.profile, type, mbs); work > 0)
      m.cpu_work_by_ranks[other.ranks] = work / own;
    m.host_cores = std::max(m.host_cores, other.host_cores);
  }
}

result<measured_profile> load_measured_profile(const std::string& path) {
  auto profile = config::load_profile_json(path);
  if (!profile)
    return profile.error();
  measured_profile m;
  m.profile = std::move(*profile);
  const std::string host_path = path + ".host.json";
  std::ifstream in(host_path);
  if (!in)
    return sailor::error::not_found(host_path, "", "cannot read the host figures");
  try {
    const auto j = nlohmann::json::parse(in);
    m.host_cores = j.at("host_cores").get<double>();
    m.cpu_per_message_s = j.at("cpu_per_message_s").get<double>();
    m.cpu_per_collective_s = j.at("cpu_per_collective_s").get<double>();
    m.ranks = j.value("ranks", 0);
  } catch (const std::exception& e) {
    return sailor::error::invalid_input(host_path, "", std::string("host figures: ") + e.what());
  }
  if (m.ranks > 0)
    m.cpu_work_by_ranks = {{m.ranks, 1.0}};
  return m;
}

}  // namespace sailor::simulator
