// The inputs and options `sailor train`, `sailor demo` and `sailor replay --live` share
// (see local_setup.hpp).
#include "local_setup.hpp"

#include <unistd.h>

#include <algorithm>

#include "demo_corpus.hpp"
#include "live_drift.hpp"
#include "live_planning.hpp"
#include "sailor/comm/link_table.hpp"
#include "sailor/config/load.hpp"

namespace sailor::app {

namespace fs = std::filesystem;

namespace {

// --link-change-at and --link-change: both or neither, a link between two of the run's zones,
// before the last iteration.
status check_link_change(const local_run_args& args, const config::cluster& cluster,
                         int iterations) {
  auto bad = [](const std::string& why, const std::string& field) {
    return sailor::error::invalid_input(field, why);
  };
  if (args.link_change_at == 0 && args.link_change.empty())
    return {};
  if (args.link_change_at <= 0 || args.link_change_at >= iterations)
    return bad("expected a number of iterations from 1 to " + std::to_string(iterations - 1) +
                 " with --link-change",
               "--link-change-at");
  auto link = comm::parse_link_change(args.link_change, "--link-change");
  if (!link)
    return link.error();
  for (const auto* zone : {&link->from, &link->to})
    if (!cluster.find_zone(*zone))
      return bad("no zone '" + *zone + "' among the run's " + std::to_string(args.zones) +
                   " zones (local-a, local-b, ...)",
                 "--link-change");
  return {};
}

}  // namespace

result<local_inputs> load_inputs(const local_run_args& args, const fs::path& work) {
  auto bad = [](const std::string& why, const std::string& field) {
    return sailor::error::invalid_input(field, why);
  };
  if (args.nodes < 1 || args.zones < 1 || args.zones > 26 || args.zones > args.nodes)
    return bad("expected between 1 and min(--nodes, 26) zones, and at least 1 node", "--zones");
  if (args.preempt_at < 0 || (args.preempt_at > 0 && args.nodes < 2))
    return bad("expected 0 (never), or a positive number with at least 2 nodes (one is lost)",
               "--preempt-at");
  if (args.checkpoint_every < 0)
    return bad("expected 0 (never) or more", "--checkpoint-every");
  if (args.planner != "search" && args.planner != "even")
    return bad("expected search or even, got '" + args.planner + "'", "--planner");
  local_inputs in;
  auto model = config::load_model(args.model);
  if (!model)
    return model.error();
  in.model = *model;
  auto job = config::load_job(args.job);
  if (!job)
    return job.error();
  in.job = *job;
  std::string data = args.data;
  if (data.empty() && args.fortunes_corpus) {
    data = (work / "fortunes.txt").string();
    if (auto err = write_fortunes_corpus(data))
      return *err;
  }
  if (!data.empty()) {
    if (!in.job.data)
      in.job.data = config::data_source{};
    in.job.data->path = data;
  }
  if (!args.init_from.empty())
    in.job.init_from = args.init_from;
  in.iterations = args.iterations > 0 ? args.iterations : in.job.iterations;
  if (in.iterations < 1)
    return bad("expected a positive number of iterations (or 'iterations' in " + args.job + ")",
               "--iterations");
  if (args.preempt_at >= in.iterations)
    return bad("expected fewer than the " + std::to_string(in.iterations) + " iterations",
               "--preempt-at");
  if (auto err = check_training_inputs(in.model, in.job, args.job))
    return *err;
  auto base = config::load_cluster(args.cluster);
  if (!base)
    return base.error();
  if (!base->gpus.find("CPU"))
    return sailor::error::invalid_input(args.cluster, "gpus",
                                        "the catalog has no 'CPU' GPU type (the nodes' devices)");
  if (args.regions < 1 || args.regions > args.zones)
    return bad("expected between 1 and --zones (" + std::to_string(args.zones) + ") regions", "--regions");
  auto cross = comm::parse_link_change("local-a:local-b=" + args.region_link, "--region-link");
  if (!cross)
    return bad("'" + args.region_link + "': expected LATENCY_MS,MBPS (megabytes per second), e.g. 50,12.5",
               "--region-link");
  cross->egress_usd_per_gb = base->defaults.cross_region.egress_usd_per_gb;
  in.cluster = local_zones_cluster(*base, args.nodes, args.zones, args.regions, &*cross);
  if (auto err = check_link_change(args, in.cluster, in.iterations))
    return *err;
  if (!args.plan.empty()) {
    auto p = config::load_plan(args.plan, in.model);
    if (!p)
      return p.error();
    in.fixed = *p;
  }
  in.node_binary = args.node_binary;
  if (in.node_binary.empty())
    in.node_binary = (fs::read_symlink("/proc/self/exe").parent_path() / "sailor-node").string();
  if (access(in.node_binary.c_str(), X_OK) != 0)
    return bad("cannot run " + in.node_binary + " (build it, or give --node-binary)",
               "--node-binary");
  return in;
}

training_settings settings_for(const local_inputs& in, const local_run_args& args,
                               const fs::path& work) {
  training_settings settings;
  settings.model = in.model;
  settings.job = in.job;
  settings.work_dir = work.string();
  settings.iterations = in.iterations;
  settings.checkpoint_every = args.checkpoint_every;
  settings.timeout_ms = static_cast<std::int64_t>(args.stall_timeout_s * 1000);
  settings.links = in.cluster.links;
  return settings;
}

// The micro-batch sizes the search may choose: the divisors of the global batch (a replica
// runs whole micro-batches; the memory check refuses those that do not fit), up to 64
// sequences (each size measured costs the profile a pass of every layer kind).
static std::vector<int> micro_batch_choices(int global_batch) {
  std::vector<int> out;
  for (int b = 1; b <= std::min(global_batch, 64); ++b)
    if (global_batch % b == 0) out.push_back(b);
  return out;
}

local_planning_inputs planning_inputs_for(const local_inputs& in, const local_run_args& args,
                                          const fs::path& work, std::shared_ptr<live_loop> loop) {
  local_planning_inputs out{in.fixed,
          in.cluster,
          in.model,
          in.job,
          {args.profile, args.model,
           // Within the run at least: a re-plan over as many ranks does not profile again.
           args.profile_cache.empty() ? (work / "profiles").string() : args.profile_cache},
          in.node_binary,
          work,
          args.planner,
          std::move(loop),
          {},  // profiles measured on this machine (obtain_profile)
          {},  // the local zones' links as configured
          true};
  out.profile.threads = local_threads_per_node(args.nodes);
  if (args.planner == "search" && !in.fixed)
    out.profile.micro_batches = micro_batch_choices(in.job.global_batch);
  return out;
}

actors::coordinator_options coordinator_options_for(const local_inputs& in,
                                                    const local_run_args& args,
                                                    const training_settings& settings,
                                                    training_events& events,
                                                    local_planning_inputs planning) {
  actors::coordinator_options options;
  for (auto& z : in.cluster.zones)
    options.supervisor.zones.push_back(z.name);
  options.supervisor.quorum = args.nodes;
  options.supervisor.settle = std::chrono::seconds{3600};  // the quorum starts planning
  // Generous: on a loaded 2-core machine a heartbeat can be late without the node being gone.
  options.supervisor.heartbeat_interval = std::chrono::milliseconds{500};
  options.supervisor.heartbeat_timeout = std::chrono::seconds{10};
  auto loop = planning.loop;
  options.plan = local_planner(std::move(planning), [&events](const plan_prediction& p) {
    std::lock_guard lock{events.mu};
    events.prediction = p;
  });
  options.supervisor.prepare_training = [&events, settings, loop](
                                          actors::training_job& tj,
                                          const actors::checkpoint_holdings& held) {
    // Resumes from the newest complete checkpoint of an earlier plan, if any.
    if (!fill_training_job(tj, settings, held))
      return false;
    plan_prediction prediction;
    {
      std::lock_guard lock{events.mu};
      prediction = events.prediction;
    }
    loop->on_plan(tj.start_iteration, prediction.uncorrected_s, prediction.bottleneck_type,
                  cross_zone_allreduce_s(prediction, tj.plan));
    std::lock_guard lock{events.mu};
    tj.predicted_iteration_s = events.prediction.predicted_s;
    events.plan = tj.plan;
    events.plan_version = tj.plan_version;
    ++events.plans;
    events.start_iteration = tj.start_iteration;
    events.resume_source = actors::state_source(tj.start_iteration, tj.restore_dir, tj.restore_files);
    events.finished = false;
    return true;
  };
  // A lost node's peers usually fail before the loss is noticed: give the supervisor time.
  options.supervisor.training_failure_grace = std::chrono::seconds{10};
  // The planner measures the model's profile on the nodes first: a minute for GPT-2 small on
  // one core, more on a loaded machine (the default minute refused such a model's plan).
  options.supervisor.plan_timeout = std::chrono::minutes{10};
  options.supervisor.on_iteration = [&events, loop](const actors::iteration_record& r,
                                                    const actors::training_progress& p) {
    loop->observe(r);
    std::lock_guard lock{events.mu};
    events.iterations.push_back(r);
    events.loss_curve = p.loss_curve();
    events.val_loss_curve = p.val_loss_curve();
    events.finished = p.finished();
    events.cv.notify_all();
  };
  options.supervisor.on_training_error = [&events](const std::string& why) {
    std::lock_guard lock{events.mu};
    if (events.error.empty())
      events.error = why;
    events.cv.notify_all();
  };
  options.supervisor.on_recovery = [&events](const actors::recovery_record& r) {
    std::lock_guard lock{events.mu};
    events.recoveries.push_back(r);
  };
  options.supervisor.board = std::make_shared<actors::status_board>();
  return options;
}

}  // namespace sailor::app
