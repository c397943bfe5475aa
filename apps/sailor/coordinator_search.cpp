#include "coordinator_search.hpp"

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "demo_profile.hpp"
#include "link_probes.hpp"
#include "live_planning.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/config/load.hpp"
#include "training_setup.hpp"

namespace sailor::app {
namespace {

// The warnings given so far: each set of missing profiles is named once, not at every plan
// (the search and the prediction of one plan both ask for the profile).
struct warned_once {
  std::mutex mutex;
  std::set<std::string> said;
  bool first(const std::string& what) {
    std::lock_guard lock{mutex};
    return said.insert(what).second;
  }
};

// The profile of every type that joined, as far as it can be had; warns about the others.
// `shape`: the plan whose processes measure a CPU profile at once.
result<measured_profile> profile_for(const coordinator_search_inputs& in,
                                     const std::optional<config::model_profile>& file,
                                     const actors::plan_request& request,
                                     const config::plan& shape, bool cached_only, warned_once& warned) {
  std::set<std::string> types;
  for (const auto& n : request.nodes)
    if (!n.devices.empty())
      types.insert(n.gpu_type);
  measured_profile out;
  if (file)
    out.profile = *file;
  std::string missing;
  for (const auto& type : types) {
    if (out.profile.find(type))
      continue;
    std::string why = "not in the profile file";
    if (type == "CPU" && !in.node_binary.empty()) {
      // Measured on this machine: the CPU nodes are taken to run on hosts like this one.
      profile_request req{"", in.model_file, in.cache_dir, type};
      req.cached_only = cached_only;  // a re-plan takes the cached one (local_planning.cpp)
      auto measured = obtain_profile(req, in.node_binary, in.work_dir, shape);
      if (measured) {
        for (auto& [name, gp] : measured->profile.by_gpu)
          out.profile.by_gpu[name] = gp;
        if (out.profile.sizes_by_tp.empty())
          out.profile.sizes_by_tp = measured->profile.sizes_by_tp;
        out.host_cores = measured->host_cores;
        out.cpu_per_message_s = measured->cpu_per_message_s;
        out.cpu_per_collective_s = measured->cpu_per_collective_s;
        out.ranks = measured->ranks;
        out.cpu_work_by_ranks = measured->cpu_work_by_ranks;
        continue;
      }
      if (cached_only)  // the caller falls back on another profile at hand: no warning yet
        return measured.error();
      why = "profiling failed: " + measured.error().message;
    }
    missing += (missing.empty() ? "" : "; ") + type + " (" + why + ")";
  }
  if (!missing.empty() && warned.first(missing))
    std::fprintf(stderr, "sailor coordinator: warning: no profile of model %s for %s: the search "
                         "times those devices with the catalog's analytic model\n",
                 in.model.name.c_str(), missing.c_str());
  if (out.profile.by_gpu.empty())
    return sailor::error::not_found("", "profile", "no profile of the joined device types");
  return out;
}

}  // namespace

result<local_planning_inputs> coordinator_search(coordinator_search_inputs in) {
  std::optional<config::model_profile> file;
  if (!in.profile_file.empty()) {
    auto loaded = config::load_profile_json(in.profile_file);
    if (!loaded)
      return loaded.error();
    file = std::move(*loaded);
  }
  local_planning_inputs out;
  out.cluster = in.cluster;
  out.model = in.model;
  out.job = in.job;
  out.profile = {"", in.model_file, in.cache_dir, "CPU"};
  out.node_binary = in.node_binary;
  out.work = in.work_dir;
  out.policy = "search";
  out.refuse_unfit = in.training;
  if (in.probes) {
    auto probes = in.probes;
    out.network = [probes](const actors::plan_request& request) {
      return probes->network_for(request.nodes);
    };
  }
  auto warned = std::make_shared<warned_once>();
  out.profile_source = [in, file, warned](const actors::plan_request& request, const config::plan& shape,
                                          bool cached_only) {
    return profile_for(in, file, request, shape, cached_only, *warned);
  };
  return out;
}

}  // namespace sailor::app
