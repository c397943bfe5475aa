// `sailor train` / `sailor demo`: the run itself (see local_cluster.hpp).
//
// This process runs the coordinator (supervisor + planner) and starts the nodes as child
// processes (`sailor-node --devices cpu:1`, one rank each). The supervisor sends each node a
// training_job (model, plan, data path, schedule) and its roles; the nodes train on their own
// threads and report every iteration (and the validation loss after every eval_every-th); the
// supervisor gathers the reports into iterations, and this command prints one line per
// iteration, a summary, and for a text job a sample of the trained model.
//
// Preemption: when a node dies (`--preempt-at K` kills one after K iterations, as a spot
// preemption would), the supervisor notices, re-plans over the remaining nodes, and the new
// plan's ranks restore parameters and optimizer state from the newest complete checkpoint and
// go on from there. The loss curve is the one an undisturbed run gives.
//
// Activations and gradients travel over comm's transport (the data plane's channel); all-reduces
// inside a zone over Gloo, and across zones hierarchically, their cross-zone phase over the
// channel too. What crosses emulated zones passes comm's link shaper, which holds the real
// bytes for the link's latency and bandwidth.
// Every child is stopped on exit, on error and on Ctrl-C; every wait is bounded.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "exit_codes.hpp"
#include "demo_corpus.hpp"
#include "live_drift.hpp"
#include "live_planning.hpp"
#include "local_cluster.hpp"
#include "local_planning.hpp"
#include "local_progress.hpp"
#include "sample_text.hpp"
#include "training_setup.hpp"
#include "sailor/comm/link_table.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"

namespace sailor::app {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

int fail(const local_run_args& args, const std::string& why, int code = exit_failed) {
  std::fprintf(stderr, "sailor %s: error: %s\n", args.command.c_str(), why.c_str());
  return code;
}

// What the run is made of, once every input was read and checked.
struct local_inputs {
  config::model_shape model;
  config::job job;
  config::cluster cluster;  ///< the local zones
  std::optional<config::plan> fixed;
  std::string node_binary;
  int iterations = 0;
};

// --link-change-at and --link-change: both or neither, a link between two of the run's zones,
// before the last iteration.
status check_link_change(const local_run_args& args, const config::cluster& cluster,
                         int iterations) {
  auto bad = [](const std::string& why, const std::string& field) {
    return sailor::error{error_kind::invalid_input, why, "", 0, field};
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

// `work`: the run's folder (the demo's corpus is joined there).
result<local_inputs> load_inputs(const local_run_args& args, const fs::path& work) {
  auto bad = [](const std::string& why, const std::string& field) {
    return sailor::error{error_kind::invalid_input, why, "", 0, field};
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
    return sailor::error{error_kind::invalid_input,
                         "the catalog has no 'CPU' GPU type (the nodes' devices)", args.cluster,
                         0, "gpus"};
  in.cluster = local_zones_cluster(*base, args.nodes, args.zones);
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

// What the local planner plans with; `loop` learns from the running job.
local_planning_inputs planning_inputs_for(const local_inputs& in, const local_run_args& args,
                                          const fs::path& work, std::shared_ptr<live_loop> loop) {
  return {in.fixed,
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
}

// The coordinator: the local planner, the supervisor's callbacks into `events`.
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
    events.resume_source =
      fs::path{tj.restore_dir}.filename() == "mem" ? "memory" : "checkpoint";
    events.finished = false;
    return true;
  };
  // A lost node's peers usually fail before the loss is noticed: give the supervisor time.
  options.supervisor.training_failure_grace = std::chrono::seconds{10};
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

// The spot preemption: the newest node still running (with --preempt-stage, every node of
// its stage) dies at once without a word (kill), or gets a notice (SIGTERM).
void preempt(const local_run_args& args, local_cluster& cluster, training_events& events,
             local_progress& progress) {
  auto& children = cluster.children();
  std::string newest;
  for (auto c = children.rbegin(); c != children.rend() && newest.empty(); ++c)
    if (c->exit_code == -1)
      newest = c->name;
  std::set<std::string> victims{newest};
  if (args.preempt_stage) {
    std::lock_guard lock{events.mu};
    if (events.plan)
      for (const auto& stage : events.plan->stages) {
        bool mine = false;
        for (const auto& r : stage.replicas)
          mine = mine || std::count(r.nodes.begin(), r.nodes.end(), newest) > 0;
        if (mine)
          for (const auto& r : stage.replicas)
            victims.insert(r.nodes.begin(), r.nodes.end());
      }
  }
  const bool notice = args.preempt_mode == "notice";
  for (auto& c : children)
    if (c.exit_code == -1 && victims.count(c.name)) {
      std::printf("  preempting %s (%s) after iteration %d\n", c.name.c_str(),
                  notice ? "SIGTERM: a notice" : "SIGKILL", progress.done());
      kill(c.pid, notice ? SIGTERM : SIGKILL);
      progress.preempted(c.name);
    }
  std::fflush(stdout);
}

// One line per iteration until every iteration completed; bounded by the stall timeout
// between iterations. A node that dies (or that --preempt-at kills) makes the supervisor
// re-plan over the others, which resume from the newest complete checkpoint: iterations after
// it are run again, and their new records replace the old ones. Returns an exit code.
int train_loop(const local_run_args& args, local_cluster& cluster, training_events& events,
               local_progress& progress, local_drift& drift) {
  auto last_status = clock_type::now() - std::chrono::seconds{1};
  while (true) {
    const std::string error = progress.take(events, cluster.live_children());
    drift.step(cluster, events, progress);
    if (!error.empty())
      return fail(args, "training failed: " + error);
    if (progress.finished())
      return exit_done;
    if (cluster.interrupted())
      return fail(args, "interrupted after " + std::to_string(progress.done()) + " iterations");
    if (args.preempt_at > 0 && progress.preempted_nodes().empty() &&
        progress.done() >= args.preempt_at)
      preempt(args, cluster, events, progress);
    while (auto* c = reap(cluster.children())) {
      const auto& gone = progress.preempted_nodes();
      if (std::find(gone.begin(), gone.end(), c->name) == gone.end())
        std::printf("  %s exited with code %d; the supervisor re-plans over the others. Its "
                    "log:\n%s\n",
                    c->name.c_str(), c->exit_code, tail_of(c->log, 600).c_str());
      std::fflush(stdout);
      progress.touch();  // re-planning and profiling take their time
    }
    if (cluster.live_children() == 0)
      return fail(args, "every node exited after " + std::to_string(progress.done()) +
                          " iterations");
    if (clock_type::now() - last_status > std::chrono::milliseconds{500}) {
      last_status = clock_type::now();
      if (auto st = cluster.query(); st && (st->phase == "waiting" || st->phase == "collecting"))
        return fail(args, (progress.done() == 0 ? "refused before training: "
                                                 : "no plan over the remaining nodes: ") +
                            st->plan_summary);
    }
    if (clock_type::now() - progress.last_progress() >
        std::chrono::milliseconds{static_cast<long>(args.stall_timeout_s * 1000)})
      return fail(args, "training stalled: no iteration completed in " +
                          std::to_string(args.stall_timeout_s) + " s (" +
                          std::to_string(progress.done()) + " done)");
  }
}

// A text job's sample from the newest checkpoint of the last plan (the nodes have stopped:
// their last checkpoint is written). "" when there is none to take, with why in `note`.
std::string final_sample(const local_run_args& args, const local_inputs& in,
                         const training_settings& settings, std::int64_t plan_version,
                         std::string& note) {
  if (args.sample_tokens <= 0)
    return {};
  if (!in.job.data || in.job.data->format != config::data_format::text) {
    note = "no sample: the job does not train on text";
    return {};
  }
  if (args.checkpoint_every == 0) {
    note = "no sample: no checkpoints (--checkpoint-every 0)";
    return {};
  }
  const auto dir = fs::path{settings.work_dir} / "checkpoints" / job_key(settings) /
                   ("v" + std::to_string(plan_version));
  text_sample_options o;
  o.tokens = args.sample_tokens;
  o.seed = static_cast<std::uint64_t>(in.job.seed);
  o.skip_unknown = true;  // a default prompt of characters the user's text may lack
  auto text = sample_text(in.model, dir.string(), args.sample_prompt, o);
  if (!text) {
    note = "no sample: " + text.error().message;
    return {};
  }
  return *text;
}

}  // namespace

int run_local_training(const local_run_args& args) {
  training_events events;  // outlives the cluster: the supervisor's callbacks write it
  local_cluster cluster{args.command};
  if (auto err = cluster.make_work_dir())
    return fail(args, err->message);
  auto in = load_inputs(args, cluster.work());
  if (!in) {
    cluster.remove_work_dir();
    return fail(args, in.error().to_string(), exit_bad_input);
  }
  if (!args.verbose) {
    log::get("actors")->set_level(spdlog::level::warn);
    log::get("train")->set_level(spdlog::level::warn);  // the sample's checkpoint restore
  }
  cluster.take_signals();
  const auto start_time = clock_type::now();
  const auto settings = settings_for(*in, args, cluster.work());
  auto planning = planning_inputs_for(*in, args, cluster.work(), std::make_shared<live_loop>());
  auto options = coordinator_options_for(*in, args, settings, events, planning);
  local_drift drift{args, planning, options.supervisor.board};
  if (auto err = cluster.start(std::move(options), args.dashboard, in->cluster, in->model))
    return cluster.cleanup(fail(args, err->message), args.keep_logs);
  std::printf("sailor %s: model %s (%s, %lld parameters), %d nodes in %d zones (cluster %s), "
              "%d iterations, data %s\n",
              args.command.c_str(), in->model.name.c_str(), config::to_string(in->model.arch),
              static_cast<long long>(in->model.total_params()), args.nodes, args.zones,
              in->cluster.name.c_str(), in->iterations,
              in->job.data ? in->job.data->path.c_str() : "synthetic (built-in)");
  std::printf("  coordinator on 127.0.0.1:%u; node logs in %s\n",
              static_cast<unsigned>(cluster.port()), cluster.work().c_str());
  if (cluster.web())
    std::printf("  dashboard on %s\n", cluster.web()->url().c_str());
  std::fflush(stdout);
  if (auto err = cluster.spawn_nodes(in->node_binary, args.nodes, args.zones))
    return cluster.cleanup(fail(args, err->message), args.keep_logs);
  if (auto err = cluster.wait_for_joins(args.nodes, args.join_timeout_s))
    return cluster.cleanup(fail(args, err->message), args.keep_logs);
  std::printf("  %d nodes joined in %.2f s\n", args.nodes,
              std::chrono::duration<double>(clock_type::now() - start_time).count());
  std::fflush(stdout);

  local_progress progress{in->iterations};
  if (int code = train_loop(args, cluster, events, progress, drift); code != exit_done)
    return cluster.cleanup(code, args.keep_logs);
  const double wall_s = std::chrono::duration<double>(clock_type::now() - start_time).count();
  progress.print_summary(args.command, wall_s);
  if (cluster.web() && args.dashboard_hold_s > 0) {
    std::printf("  dashboard on %s for %.0f s more (Ctrl-C ends it)\n",
                cluster.web()->url().c_str(), args.dashboard_hold_s);
    std::fflush(stdout);
    cluster.hold(args.dashboard_hold_s);
  }
  // The nodes leave (writing their last checkpoint) before the sample is drawn from it.
  cluster.stop_processes();
  std::string note;
  std::int64_t plan_version = 0;
  {
    std::lock_guard lock{events.mu};
    plan_version = events.plan_version;
  }
  const auto sample = final_sample(args, *in, settings, plan_version, note);
  if (!sample.empty())
    std::printf("\n  sample of the trained model (%d characters after the prompt):\n%s\n",
                args.sample_tokens, sample.c_str());
  else if (!note.empty() && args.sample_tokens > 0 && in->job.data)
    std::printf("  %s\n", note.c_str());
  std::fflush(stdout);
  if (!args.summary_json.empty()) {
    auto j = progress.summary_json(wall_s);
    j["nodes"] = args.nodes;
    j["zones"] = args.zones;
    j["model"] = in->model.name;
    j["seed"] = in->job.seed;
    j["data"] = in->job.data ? nlohmann::json(in->job.data->path) : nlohmann::json(nullptr);
    if (!sample.empty())
      j["sample"] = sample;
    std::ofstream out(args.summary_json);
    out << j.dump(2) << "\n";
    if (!out)
      return cluster.cleanup(fail(args, "cannot write " + args.summary_json), args.keep_logs);
  }
  return cluster.cleanup(exit_done, args.keep_logs);
}

}  // namespace sailor::app
