#include "local_planning.hpp"

#include "sailor/config/local_sgd.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "live_planning.hpp"
#include "live_slow_nodes.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/train_progress.hpp"
#include "sailor/simulator/simulator.hpp"
#include "training_setup.hpp"

namespace sailor::app {
namespace {

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

// Per stage: the slowest replica's compute per iteration and the gradient all-reduce; and the
// GPU type of the bottleneck stage's slowest replica.
void stage_times(const simulator::estimate& e, const config::plan& p, plan_prediction& out) {
  out.stages.clear();
  for (const auto& s : e.stages) {
    stage_prediction sp;
    sp.first_layer = s.first_layer;
    sp.end_layer = s.end_layer;
    sp.compute_s = (s.forward_s + s.backward_s) * s.micro_batches + s.update_s;
    sp.allreduce_s = s.allreduce_s;
    out.stages.push_back(sp);
  }
  const auto b = static_cast<std::size_t>(e.bottleneck_stage);
  if (b < p.stages.size() && !p.stages[b].replicas.empty()) {
    const auto r = static_cast<std::size_t>(b < e.stages.size() ? e.stages[b].slowest_replica : 0);
    out.bottleneck_type = p.stages[b].replicas[std::min(r, p.stages[b].replicas.size() - 1)].gpu_type;
  }
}

// The prediction from the model's profile on this machine (null: the analytic one, with why),
// corrected by what the running job measured.
plan_prediction prediction_of(const local_planning_inputs& in, const config::plan& p,
                              const result<measured_profile>& profile) {
  plan_prediction out;
  auto rough = predict(in, p, cpu_sim_options(nullptr), nullptr);
  if (rough) {
    out.analytic_s = rough->iteration_time_s;
    stage_times(*rough, p, out);
  }
  out.predicted_s = out.uncorrected_s = out.analytic_s;
  out.note = rough ? "simulator, analytic CPU model from the catalog (rough)"
                   : "no prediction: " + rough.error().message;
  if (!profile) {
    out.note += "; profiling failed: " + profile.error().message;
    return out;
  }
  auto sim = cpu_sim_options(&*profile);
  int ranks = 0;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      ranks += std::max(1, r.tp);
  auto measured = predict(in, p, sim, &profile->profile);
  if (!measured) {
    out.note += "; the profiled prediction failed: " + measured.error().message;
    return out;
  }
  out.predicted_s = out.uncorrected_s = measured->iteration_time_s;
  stage_times(*measured, p, out);
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "simulator on this machine's profile (CPU work, measured by %d processes at "
                "once; x%.2f at %d, the host model of %zu counts), the %d ranks sharing %.2f "
                "cores, %.0f/%.0f us CPU per message/all-reduce; pipeline %.4f s + gradient "
                "sync and update %.4f s",
                profile->ranks, simulator::host_cpu_scale(sim, ranks), ranks,
                profile->cpu_work_by_ranks.size(), ranks, profile->host_cores,
                profile->cpu_per_message_s * 1e6, profile->cpu_per_collective_s * 1e6,
                measured->pipeline_s, measured->sync_and_update_s);
  out.note = buf;
  return out;
}

// Applies the loop's correction to `out` (the factor of the bottleneck's GPU type).
void correct(plan_prediction& out, live_loop* loop) {
  if (!loop)
    return;
  std::lock_guard lock{loop->mu};
  out.correction_factor = loop->correction.factor(out.bottleneck_type);
  out.predicted_s = out.uncorrected_s * out.correction_factor;
  if (out.correction_factor != 1.0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; corrected x%.3f (median measured/predicted of %zu %s iterations)",
                  out.correction_factor, loop->correction.samples(out.bottleneck_type),
                  out.bottleneck_type.c_str());
    out.note += buf;
  }
}

// The search's plan over the nodes, fed by the profile (or, when profiling failed, by the
// catalog's analytic model, with a warning naming what is missing).
result<config::plan> searched(const local_planning_inputs& in, const actors::plan_request& request,
                              const result<measured_profile>& profile) {
  simulator::speed_correction none;
  const simulator::speed_correction* correction = &none;
  std::unique_lock<std::mutex> lock;
  if (in.loop) {
    lock = std::unique_lock<std::mutex>{in.loop->mu};
    correction = &in.loop->correction;
  }
  if (!profile)
    std::fprintf(stderr, "  warning: no profile of %s for model %s (%s): the search plans on the "
                         "catalog's analytic model\n",
                 request.nodes.empty() ? "the nodes' devices" : request.nodes.front().gpu_type.c_str(),
                 in.model.name.c_str(), profile.error().message.c_str());
  return search_plan(request.nodes, in.cluster, in.model, in.job, profile ? &*profile : nullptr,
                     *correction);
}

// The profile for `shape` from the inputs' source (`cached_only`: one at hand, or an error).
result<measured_profile> profile_of(const local_planning_inputs& in,
                                    const actors::plan_request& request, const config::plan& shape,
                                    bool cached_only) {
  if (in.profile_source)
    return in.profile_source(request, shape, cached_only);
  profile_request req = in.profile;
  req.cached_only = req.cached_only || cached_only;
  return obtain_profile(req, in.node_binary, in.work, shape);
}

bool replanning(const actors::plan_request& request) {
  return request.has_current && !request.current.stages.empty();
}

// The profile the search chooses on: for a re-plan of a running job, the running plan's
// (cached: it was measured when that plan was made) unless none is at hand.
result<measured_profile> profile_for_search(const local_planning_inputs& in,
                                            const actors::plan_request& request,
                                            const config::plan& shape) {
  if (replanning(request))
    if (auto cached = profile_of(in, request, shape, true)) return cached;
  return profile_of(in, request, shape, false);
}

// The profile the new plan is predicted with when it has another count of ranks than the one
// searched on: measured for that count, except during a re-plan of a running job, where only a
// cached one is taken (measuring takes seconds of every process on the machine while the job
// waits) and otherwise the running plan's profile, whose host figures are those of its count.
result<measured_profile> profile_for_prediction(const local_planning_inputs& in,
                                                const actors::plan_request& request,
                                                const config::plan& real,
                                                std::optional<result<measured_profile>> searched_on) {
  if (!replanning(request)) return profile_of(in, request, real, false);
  if (auto exact = profile_of(in, request, real, true)) return exact;
  if (searched_on && *searched_on) return std::move(*searched_on);
  // Planned without a profile (`--planner even`): the one the running plan was predicted with.
  if (auto running = profile_of(in, request, request.current, true)) return running;
  return profile_of(in, request, real, false);
}

// Whether a node the running plan uses is no longer among the request's nodes.
bool lost_capacity(const actors::plan_request& r) {
  if (!r.has_current) return false;
  std::set<std::string> present;
  for (const auto& n : r.nodes) present.insert(n.name);
  for (const auto& stage : r.current.stages)
    for (const auto& replica : stage.replicas)
      for (const auto& node : replica.nodes)
        if (!present.count(node)) return true;
  return false;
}

// Capacity was lost: the stragglers left out of plans are capacity still, planned again at
// the speed they were left out at (live_loop::slowed; the drift watch judges them anew).
void readmit_left_out(live_loop& loop, const actors::plan_request& r) {
  for (const auto& n : r.nodes) {
    if (!loop.excluded.erase(n.name)) continue;
    const auto slowed = loop.slowed.find(n.name);
    std::fprintf(stderr, "  closed loop: %s, left out as a straggler, comes back into the plan "
                         "(capacity was lost), planned %.1fx slower than its type\n",
                 n.name.c_str(), slowed == loop.slowed.end() ? 1.0 : std::max(1.0, slowed->second));
  }
}

}  // namespace

result<planned> plan_and_predict(const local_planning_inputs& in,
                                 const actors::plan_request& original, bool what_if) {
  // Nodes the loop left out (stragglers) are not planned on; those it slowed are planned at
  // their measured speed, as types of their own (live_slow_nodes.hpp).
  actors::plan_request request = original;
  std::map<std::string, double> slow_factors;
  if (in.loop) {
    std::lock_guard lock{in.loop->mu};
    if (!what_if && lost_capacity(original))
      readmit_left_out(*in.loop, original);
    std::erase_if(request.nodes, [&](const actors::node_inventory& n) {
      return in.loop->excluded.count(n.name) > 0;
    });
    slow_factors = in.loop->slowed;
  }
  const slowed_nodes slow{slow_factors, request.nodes};
  local_planning_inputs slowed_in = in;
  if (in.network)
    slowed_in.cluster = in.network(request);
  slow.add_to(slowed_in.cluster.gpus);
  actors::plan_request slowed_request = request;
  slow.rename(slowed_request.nodes);
  auto with_slow = [&slow](result<measured_profile> r) {
    if (r)
      slow.add_to(r->profile);
    return r;
  };
  std::map<std::string, double> link_factors;
  if (in.loop) {
    std::lock_guard lock{in.loop->mu};
    slowed_in.cluster = simulator::corrected_links(std::move(slowed_in.cluster), in.loop->links);
    link_factors = in.loop->links.factors();
  }
  config::plan p;
  std::optional<result<measured_profile>> profile;
  std::string used = in.fixed ? "fixed" : in.policy;
  int profiled_ranks = 0;
  if (in.fixed) {
    p = *in.fixed;
  } else {
    auto made = actors::even_plan(request.nodes, in.model.num_all_layers(), in.job.global_batch);
    if (!made)
      return made.error();
    p = *made;
    if (p.global_batch <= 0)
      p.global_batch = in.job.global_batch;
    // Memory first, from the catalog alone: no need to profile a model that cannot run even
    // when every device holds a share of its layers.
    if (auto why = memory_refusal(in.model, p, in.cluster, in.job);
        !why.empty() && in.policy == "search" && in.refuse_unfit)
      return sailor::error{error_kind::invalid_input,
                           "the model does not fit a device's memory: " + why, "", 0, "plan"};
    if (in.policy == "search") {
      // The profile is taken for the even plan's shape (micro-batch, TP 1, as many processes
      // at once as devices joined): the search chooses among plans of that shape. A re-plan
      // searches on the running plan's profile (cached): profiling again for another count
      // of processes changes the host's figures, not the layers' order.
      const config::plan& shape =
        request.has_current && !request.current.stages.empty() ? request.current : p;
      profile = profile_for_search(in, request, shape);
      profiled_ranks = actors::plan_world_size(shape);
      auto found = searched(slowed_in, slowed_request, with_slow(*profile));
      if (found) {
        p = std::move(*found);
      } else {
        std::fprintf(stderr, "  warning: the search found no plan (%s): the even plan is used\n",
                     found.error().message.c_str());
        used = "even (the search found none)";
      }
    }
  }
  if (p.global_batch <= 0)
    p.global_batch = in.job.global_batch;
  // The job's across_regions: diloco joins the regions of a plan that spans them, whichever
  // planner made it (as `sailor coordinator` does).
  if (auto bad = config::apply_data_parallel(p, in.job, in.cluster, 0, !request.has_current)) return *bad;
  // The same check as `sailor coordinator --train-dir` (training_setup.hpp).
  if (auto why = memory_refusal(in.model, p, slowed_in.cluster, in.job);
      !why.empty() && in.refuse_unfit)
    return sailor::error{error_kind::invalid_input,
                         "the model does not fit a device's memory: " + why, "", 0, "plan"};
  if (!in.fixed)
    if (auto err = actors::place_replicas(p, slowed_request.nodes))
      return *err;
  config::plan real = p;  // the types the runtime knows
  slow.restore(real);
  // The profile's host figures are those of as many processes as the plan has ranks: the
  // search's plan may use fewer devices than joined (cached per count of processes).
  if (!profile || (!what_if && actors::plan_world_size(real) != profiled_ranks))
    profile = profile_for_prediction(in, request, real, std::move(profile));
  // Predicted with the slowed nodes at their speed: the drift check compares each node's
  // compute with its stage's prediction.
  auto prediction = prediction_of(slowed_in, p, with_slow(*profile));
  if (auto base = simulator::slowed_base_type(prediction.bottleneck_type); !base.empty())
    prediction.bottleneck_type = base;
  prediction.planner = used;
  prediction.link_factors = link_factors;
  correct(prediction, in.loop.get());
  // The job's cost limits are hard, as for `sailor plan`: a plan that breaks them is refused.
  if (in.refuse_unfit)
    if (auto over = cost_refusal(in.model, p, slowed_in.cluster, in.job, prediction.predicted_s))
      return *over;
  if (!real.estimate)
    real.estimate = config::plan_estimate{};
  real.estimate->iteration_time_s = prediction.predicted_s;
  return planned{std::move(real), std::move(prediction)};
}

actors::planning_function local_planner(local_planning_inputs in,
                                        std::function<void(const plan_prediction&)> predicted) {
  return [in = std::move(in), predicted = std::move(predicted)](
           const actors::plan_request& request) -> result<config::plan> {
    auto made = plan_and_predict(in, request, false);
    if (!made)
      return made.error();
    predicted(made->prediction);
    return std::move(made->plan);
  };
}

}  // namespace sailor::app
