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

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "exit_codes.hpp"
#include "demo_corpus.hpp"
#include "job_metrics.hpp"
#include "live_drift.hpp"
#include "live_planning.hpp"
#include "local_cluster.hpp"
#include "local_planning.hpp"
#include "local_progress.hpp"
#include "local_setup.hpp"
#include "preemption.hpp"
#include "run_folder.hpp"
#include "sample_text.hpp"
#include "share_dir.hpp"
#include "training_setup.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"

namespace sailor::app {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

int local_run_failed(const local_run_args& args, const std::string& why, int code = exit_failed) {
  std::fprintf(stderr, "sailor %s: error: %s\n", args.command.c_str(), why.c_str());
  return code;
}

// The spot preemption: the newest node still running that the plan uses (with
// --preempt-stage, every node of its stage) dies at once without a word (kill), or gets a
// notice (SIGTERM). A node the plan leaves idle is never taken: its loss would change nothing.
void preempt(const local_run_args& args, local_cluster& cluster, training_events& events,
             local_progress& progress) {
  auto& children = cluster.children();
  std::vector<std::string> live;
  for (const auto& c : children)
    if (c.exit_code == -1)
      live.push_back(c.name);
  std::set<std::string> victims;
  {
    std::lock_guard lock{events.mu};
    victims = preemption_victims(live, events.plan, args.preempt_stage);
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
               local_progress& progress, local_drift& drift, bool& interrupted) {
  auto last_status = clock_type::now() - std::chrono::seconds{1};
  std::int64_t plan_seen = 0;
  while (true) {
    const std::string error = progress.take(events, cluster.live_children());
    drift.step(cluster, events, progress);
    if (!error.empty())
      return local_run_failed(args, "training failed: " + error);
    if (progress.finished())
      return exit_done;
    if (cluster.interrupted()) {
      interrupted = true;
      return local_run_failed(args, "interrupted after " + std::to_string(progress.done()) + " iterations");
    }
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
      return local_run_failed(args, "every node exited after " + std::to_string(progress.done()) +
                          " iterations");
    if (clock_type::now() - last_status > std::chrono::milliseconds{500}) {
      last_status = clock_type::now();
      auto st = cluster.query();
      if (st && (st->phase == "waiting" || st->phase == "collecting"))
        return local_run_failed(args, (progress.done() == 0 ? "refused before training: "
                                                 : "no plan over the remaining nodes: ") +
                            st->plan_summary);
      // Profiling and planning are not a stall (a large model's profile takes a minute on a
      // CPU); the bound runs from the plan's start.
      if (st && (st->phase == "planning" || st->plan_version != plan_seen)) {
        plan_seen = st->plan_version;
        progress.touch();
      }
    }
    if (clock_type::now() - progress.last_progress() >
        std::chrono::milliseconds{static_cast<long>(args.stall_timeout_s * 1000)})
      return local_run_failed(args, "training stalled: no iteration completed in " +
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

// What the run is and where: the first lines a user sees once the coordinator listens.
void print_start(const local_run_args& args, const local_inputs& in, const run_folder::place& place,
                 const local_cluster& cluster) {
  std::printf("sailor %s: model %s (%s, %lld parameters), %d nodes in %d zones (cluster %s), "
              "%d compute threads each, %d iterations, data %s\n",
              args.command.c_str(), in.model.name.c_str(), config::to_string(in.model.arch),
              static_cast<long long>(in.model.total_params()), args.nodes, args.zones,
              in.cluster.name.c_str(), local_threads_per_node(args.nodes), in.iterations,
              in.job.data ? in.job.data->path.c_str() : "synthetic (built-in)");
  if (place.resumed)
    std::printf("  resuming the run in %s: %d of %d iterations in its checkpoint\n", place.dir.c_str(),
                place.earlier, in.iterations);
  else if (!place.dir.empty())
    std::printf("  the run's folder: %s (its checkpoints, and the trained model at the end)\n",
                place.dir.c_str());
  std::printf("  coordinator on 127.0.0.1:%u; node logs in %s\n",
              static_cast<unsigned>(cluster.port()), cluster.work().c_str());
  if (cluster.web())
    std::printf("  dashboard on %s\n", cluster.web()->url().c_str());
  std::fflush(stdout);
}

}  // namespace

int run_local_training(const local_run_args& asked) {
  local_run_args args = asked;
  // The defaults that are shipped files ("" when no share dir was found, share_dir.hpp); a
  // resumed run takes its own from its record.
  for (const auto& [value, option] : {std::pair{args.model, "--model"}, std::pair{args.job, "--job"},
                                      std::pair{args.cluster, "--cluster"}})
    if (args.resume.empty() && (args.command == "demo" || option == std::string("--cluster")))
      if (auto err = check_shipped_default(value, option))
        return local_run_failed(args, err->to_string(), exit_unavailable);
  auto place = run_folder::open(args);  // --resume completes args from the run's record
  if (!place)
    return local_run_failed(args, place.error().to_string(), exit_code_for(place.error().kind));
  if (args.zones == 0) args.zones = std::min(std::max(1, args.nodes), 2);
  training_events events;  // outlives the cluster: the supervisor's callbacks write it
  local_cluster cluster{args.command};
  if (auto err = place->dir.empty() ? cluster.make_work_dir()
                                    : cluster.use_work_dir(place->dir / run_folder::state_folder()))
    return local_run_failed(args, err->message);
  auto in = load_inputs(args, cluster.work());
  if (!in) {
    cluster.remove_work_dir();
    run_folder::discard(*place);
    return local_run_failed(args, in.error().to_string(), exit_bad_input);
  }
  const auto settings = settings_for(*in, args, cluster.work());
  if (!place->dir.empty()) {
    const auto data = in->job.data ? fs::absolute(in->job.data->path).lexically_normal().string() : "";
    if (auto err = run_folder::record(place->dir, args, data, in->iterations, job_key(settings)))
      return local_run_failed(args, err->message);
  }
  bool interrupted = false;
  // Every exit once the processes may have started: they stop (the nodes flush their
  // checkpoints), then a run's folder says where its state is.
  auto stop = [&](int code) {
    cluster.cleanup(code, args.keep_logs);
    if (code != exit_done)
      run_folder::report_stopped(*place, args, interrupted ? "interrupted" : "failed", in->iterations);
    return code;
  };
  if (!args.verbose) {
    log::get("actors")->set_level(spdlog::level::warn);
    log::get("train")->set_level(spdlog::level::warn);  // the sample's checkpoint restore
  }
  cluster.take_signals();
  const auto start_time = clock_type::now();
  auto planning = planning_inputs_for(*in, args, cluster.work(), std::make_shared<live_loop>());
  auto options = coordinator_options_for(*in, args, settings, events, planning);
  auto jsonl = open_metrics_jsonl(args.metrics_jsonl, options.supervisor.board, in->cluster,
                                  in->model);
  if (!jsonl) {
    cluster.remove_work_dir();
    run_folder::discard(*place);
    return local_run_failed(args, jsonl.error().message, exit_bad_input);
  }
  append_figures_on_iteration(options.supervisor, *jsonl);
  local_drift drift{args, planning, options.supervisor.board};
  if (auto err = cluster.start(std::move(options), args.dashboard, in->cluster, in->model))
    return stop(local_run_failed(args, err->message));
  print_start(args, *in, *place, cluster);
  if (auto err = cluster.spawn_nodes(in->node_binary, args.nodes, args.zones))
    return stop(local_run_failed(args, err->message));
  if (auto err = cluster.wait_for_joins(args.nodes, args.join_timeout_s)) {
    interrupted = err->message == "interrupted";
    return stop(local_run_failed(args, err->message));
  }
  std::printf("  %d nodes joined in %.2f s\n", args.nodes,
              std::chrono::duration<double>(clock_type::now() - start_time).count());
  std::fflush(stdout);

  local_progress progress{in->iterations, place->earlier};
  if (int code = train_loop(args, cluster, events, progress, drift, interrupted); code != exit_done)
    return stop(code);
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
    std::printf("\n  sample of the trained model (%d %s after the prompt):\n%s\n", args.sample_tokens,
                in->job.data->tokenizer.kind == config::tokenizer_kind::characters ? "characters" : "tokens",
                sample.c_str());
  else if (!note.empty() && args.sample_tokens > 0 && in->job.data)
    std::printf("  %s\n", note.c_str());
  std::fflush(stdout);
  if (!args.summary_json.empty()) {
    auto j = progress.summary_json(wall_s);
    j["nodes"] = args.nodes;
    j["zones"] = args.zones;
    j["threads_per_rank"] = local_threads_per_node(args.nodes);
    j["model"] = in->model.name;
    j["seed"] = in->job.seed;
    j["data"] = in->job.data ? nlohmann::json(in->job.data->path) : nlohmann::json(nullptr);
    if (!sample.empty())
      j["sample"] = sample;
    std::ofstream out(args.summary_json);
    out << j.dump(2) << "\n";
    if (!out)
      return stop(local_run_failed(args, "cannot write " + args.summary_json));
  }
  // Trained: an export that fails says so and how to try again; the checkpoint is kept.
  return cluster.cleanup(run_folder::finish(*place, args, in->model, in->iterations), args.keep_logs);
}

}  // namespace sailor::app
