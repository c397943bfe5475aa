// `sailor coordinator --planner`: which planning function the supervisor's planner actor runs.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "coordinator_drift.hpp"
#include "coordinator_parts.hpp"
#include "coordinator_search.hpp"
#include "link_probes.hpp"
#include "exit_codes.hpp"
#include "training_setup.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/sailor_planning.hpp"
#include "sailor/config/local_sgd.hpp"
#include "sailor/config/sailor_format.hpp"

namespace sailor::app {
namespace {

// Sailor's planner needs per-layer profiles of the GPU types that join.
int sailor_planner(const coordinator_args& args, const coordinator_inputs& in,
                   actors::coordinator_options& options) {
  if (args.sailor_data.empty()) {
    std::fprintf(stderr, "sailor coordinator: --planner sailor needs --sailor-data DIR\n");
    return exit_bad_input;
  }
  auto name = in.model.sailor_name.empty() ? in.model.name : in.model.sailor_name;
  auto data = config::load_sailor_data(args.sailor_data, name);
  if (!data) {
    std::fprintf(stderr, "sailor coordinator: %s\n", data.error().to_string().c_str());
    return exit_bad_input;
  }
  planner::problem prob;
  prob.model = in.model;
  prob.profile = data->profile;
  prob.network = data->network;
  prob.cluster = in.cluster;
  prob.job = in.job;
  options.plan = actors::sailor_planning(std::move(prob));
  return exit_done;
}

// The planner's search on the profiles at hand (coordinator_search.hpp).
int search_planner(const coordinator_args& args, const coordinator_inputs& in,
                   actors::coordinator_options& options) {
  auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "sailor-node";
  // Profiles measured here are cached (a re-plan takes them from there), by default in the
  // train dir.
  std::string cache = args.profile_cache;
  if (cache.empty() && !args.train_dir.empty())
    cache = (std::filesystem::path{args.train_dir} / "profiles").string();
  coordinator_search_inputs search_in{
    in.model, in.cluster, in.job, args.model, args.profile, cache,
    access(self.c_str(), X_OK) == 0 ? self.string() : "",
    args.train_dir.empty() ? std::filesystem::temp_directory_path().string() : args.train_dir,
    !args.train_dir.empty(), in.probes};
  if (in.probes) {
    auto probes = in.probes;
    options.supervisor.on_admitted = [probes](const actors::node_inventory& node,
                                              const caf::actor& agent) {
      probes->admitted(node, agent);
    };
  }
  auto search = coordinator_search(std::move(search_in));
  if (!search) {
    std::fprintf(stderr, "sailor coordinator: --profile: %s\n", search.error().to_string().c_str());
    return exit_bad_input;
  }
  // Planned and predicted as `sailor demo` plans; the drift loop watches what it predicted.
  options.plan = in.drift->planner(std::move(*search));
  return exit_done;
}

// Needs no profiles (CPU nodes have none): layers split evenly, one pipeline per device group
// of a zone.
actors::planning_function even_planner(const coordinator_args& args, const coordinator_inputs& in) {
  int layers = in.model.num_all_layers();
  int batch = in.job.global_batch;
  const bool training = !args.train_dir.empty();
  return [layers, batch, training, shape = in.model, pool = in.cluster,
          job_cfg = in.job](const actors::plan_request& request) -> result<config::plan> {
    auto p = actors::even_plan(request.nodes, layers, batch);
    if (!p || !training)
      return p;
    // Refused before training starts: a model that does not fit a device's memory.
    if (auto why = memory_refusal(shape, *p, pool, job_cfg); !why.empty())
      return sailor::error::invalid_input("plan",
                                          "the model does not fit a device's memory: " + why);
    return p;
  };
}

// The job's across_regions: diloco joins the regions of every plan that spans them, whichever
// planner made it (config::apply_data_parallel: a first plan inside one region, or one whose
// pipelines cross regions, is refused naming data_parallel.across_regions).
actors::planning_function with_data_parallel(actors::planning_function plan, const coordinator_inputs& in) {
  if (in.job.data_parallel.across_regions != config::across_regions_mode::diloco) return plan;
  return [plan = std::move(plan), job = in.job, pool = in.cluster](const actors::plan_request& request)
             -> result<config::plan> {
    auto p = plan(request);
    if (!p) return p;
    if (auto bad = config::apply_data_parallel(*p, job, pool, 0, !request.has_current)) return *bad;
    return p;
  };
}

int chosen_planner(const coordinator_args& args, const coordinator_inputs& in,
                   actors::coordinator_options& options) {
  if (args.planner == "sailor")
    return sailor_planner(args, in, options);
  if (args.planner == "search")
    return search_planner(args, in, options);
  if (args.planner == "even") {
    options.plan = even_planner(args, in);
    return exit_done;
  }
  std::fprintf(stderr, "sailor coordinator: --planner: expected even, search or sailor, got '%s'\n",
               args.planner.c_str());
  return exit_bad_input;
}

}  // namespace

int choose_planner(const coordinator_args& args, const coordinator_inputs& in,
                   actors::coordinator_options& options) {
  const int rc = chosen_planner(args, in, options);
  if (rc == exit_done && options.plan) options.plan = with_data_parallel(std::move(options.plan), in);
  return rc;
}

}  // namespace sailor::app
