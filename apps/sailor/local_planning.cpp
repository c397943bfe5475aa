#include "local_planning.hpp"

#include <algorithm>
#include <cstdio>

#include "sailor/actors/placement.hpp"
#include "sailor/simulator/simulator.hpp"
#include "training_setup.hpp"

namespace sailor::app {
namespace {

// How our runtime runs on CPU devices: no CUDA context or NCCL buffers, sends overlap compute,
// every receiving TP rank gets a full copy (executor.cpp).
simulator::sim_options cpu_options() {
  simulator::sim_options sim;
  sim.framework_overhead_bytes = 0;
  sim.overlap_p2p = true;
  sim.p2p_partitioned = false;
  return sim;
}

result<simulator::estimate> predict(const local_planning_inputs& in, const config::plan& p,
                                    const simulator::sim_options& sim,
                                    const config::model_profile* profile) {
  simulator::sim_inputs si;
  si.model = in.model;
  si.gpus = in.cluster.gpus;
  si.cluster = &in.cluster;
  si.job = in.job;
  si.profile = profile;
  auto ctx = simulator::sim_context::make(si, sim);
  if (!ctx)
    return ctx.error();
  return simulator::simulate(*ctx, p);
}

// The prediction from the model's profile on this machine, or the analytic one (with why).
plan_prediction prediction_of(const local_planning_inputs& in, const config::plan& p) {
  plan_prediction out;
  auto rough = predict(in, p, cpu_options(), nullptr);
  if (rough)
    out.analytic_s = rough->iteration_time_s;
  out.predicted_s = out.analytic_s;
  out.note = rough ? "simulator, analytic CPU model from the catalog (rough)"
                   : "no prediction: " + rough.error().message;
  auto profile = obtain_profile(in.profile, in.node_binary, in.work, p);
  if (!profile) {
    out.note += "; profiling failed: " + profile.error().message;
    return out;
  }
  auto sim = cpu_options();
  // The profile times each layer as the executor runs it: nothing to remove per layer. Our
  // runtime all-reduces gradients per layer, then the loss and norm over every rank; the
  // ranks are processes of this machine and share its cores (see obtain_profile).
  sim.profile_layer_overhead_s = 0;
  sim.allreduce_per_layer = true;
  sim.final_allreduce = true;
  sim.host_cores = profile->host_cores;
  sim.cpu_per_message_s = profile->cpu_per_message_s;
  sim.cpu_per_collective_s = profile->cpu_per_collective_s;
  int ranks = 0;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      ranks += std::max(1, r.tp);
  auto measured = predict(in, p, sim, &profile->profile);
  if (!measured) {
    out.note += "; the profiled prediction failed: " + measured.error().message;
    return out;
  }
  out.predicted_s = measured->iteration_time_s;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "simulator on this machine's profile (CPU work, measured by %d processes at "
                "once), the %d ranks sharing %.2f cores, %.0f/%.0f us CPU per message/"
                "all-reduce; pipeline %.4f s + gradient sync and update %.4f s",
                ranks, ranks, profile->host_cores, profile->cpu_per_message_s * 1e6,
                profile->cpu_per_collective_s * 1e6, measured->pipeline_s,
                measured->sync_and_update_s);
  out.note = buf;
  return out;
}

}  // namespace

actors::planning_function local_planner(local_planning_inputs in,
                                        std::function<void(const plan_prediction&)> predicted) {
  const int layers = in.model.num_all_layers();
  return [in = std::move(in), predicted = std::move(predicted),
          layers](const actors::plan_request& request) -> result<config::plan> {
    config::plan p;
    if (in.fixed) {
      p = *in.fixed;
    } else {
      auto made = actors::even_plan(request.nodes, layers, in.job.global_batch);
      if (!made)
        return made.error();
      p = *made;
    }
    if (p.global_batch <= 0)
      p.global_batch = in.job.global_batch;
    // Memory first, from the catalog alone: no need to profile a model that cannot run. The
    // same check as `sailor coordinator --train-dir` (training_setup.hpp).
    if (auto why = memory_refusal(in.model, p, in.cluster, in.job); !why.empty())
      return sailor::error{error_kind::invalid_input,
                           "the model does not fit a device's memory: " + why, "", 0, "plan"};
    predicted(prediction_of(in, p));
    return p;
  };
}

}  // namespace sailor::app
