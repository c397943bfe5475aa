// `sailor demo`: plans and trains the tiny model over N sailor-node processes on this machine,
// in Z emulated zones, through the actor runtime.
//
// This process runs the coordinator (supervisor + planner) and starts the nodes as child
// processes (`sailor-node --devices cpu:1`, one rank each). The supervisor sends each node a
// training_job (model, plan, Gloo FileStore folder) and its roles; the nodes train on their
// own threads and report every iteration; the supervisor gathers the reports into
// iterations (loss from the last stage, the slowest rank's time), and this command prints
// one line per iteration and a summary.
//
// Preemption: when a node dies (`--preempt-at K` kills one after K iterations, as a spot
// preemption would), the supervisor notices (its connection closes, or its heartbeats stop),
// re-plans over the remaining nodes, and the new plan's ranks restore parameters and optimizer
// state from the newest complete checkpoint (written asynchronously by every plan, in a form
// any other plan can load: train/checkpoint.hpp) and go on from there. The loss curve is the
// one an undisturbed run gives.
//
// Activations and gradients travel over comm's transport (the data plane's channel); all-reduces
// inside a zone over Gloo, and across zones hierarchically, their cross-zone phase over the
// channel too. What crosses emulated zones passes comm's link shaper, which holds the real
// bytes for the link's latency and bandwidth (train/data_plane.hpp).
//
// The prediction: once a plan is chosen (and fits the devices' memory by the simulator's
// analytic estimate), the demo measures the model's per-layer times on this machine with
// `sailor-node profile` (for the plan's micro-batch size and TP degrees, a few seconds for the
// tiny model; `--profile FILE` caches the result) and runs the simulator on that profile.
//
// Every child is stopped on exit, on error and on Ctrl-C; every wait is bounded.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "child_process.hpp"
#include "commands.hpp"
#include "dashboard.hpp"
#include "demo_profile.hpp"
#include "training_setup.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/actors/train/progress.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::app {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

struct demo_args {
  int nodes = 4;
  int zones = 2;
  int iterations = 20;
  std::string model = SAILOR_SOURCE_DIR "/configs/models/tiny.yaml";
  std::string job = SAILOR_SOURCE_DIR "/configs/jobs/tiny.yaml";
  std::string cluster = SAILOR_SOURCE_DIR "/configs/clusters/local-2-zones.yaml";
  std::string plan;  ///< a fixed plan instead of the planner's
  std::string profile;  ///< cached profile: read if it exists (and covers the plan), else written
  std::string summary_json;
  std::string node_binary;
  double join_timeout_s = 30;
  double stall_timeout_s = 60;
  bool verbose = false;
  bool keep_logs = false;
  int preempt_at = 0;        ///< kill one node (SIGKILL) after this many iterations; 0: never
  int checkpoint_every = 1;  ///< 0: no checkpoints (a re-plan starts training afresh)
  dashboard_args dashboard;
  double dashboard_hold_s = 0;  ///< keep serving the dashboard this long after training
};

// What the actors tell the main thread.
struct demo_events {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<actors::iteration_record> iterations;
  std::vector<double> loss_curve;
  bool finished = false;
  std::string error;
  double predicted_s = 0;
  double predicted_analytic_s = 0;  ///< from the catalog, without a profile
  std::string prediction_note;
  std::optional<config::plan> plan;
  int plans = 0;
  int start_iteration = 0;  ///< where the newest plan resumed
};

// Zone names: local-a, local-b, ...
std::string zone_name(int z) { return std::string("local-") + static_cast<char>('a' + z); }

// The shipped cluster's catalog and link, with Z zones holding the N nodes' devices.
config::cluster make_cluster(const config::cluster& base, int nodes, int zones) {
  config::cluster c = base;
  c.name = "local-" + std::to_string(zones) + "-zones";
  c.zones.clear();
  c.links.clear();
  c.regions.clear();
  config::region region{"local", {}};
  for (int z = 0; z < zones; ++z) {
    config::zone zone;
    zone.name = zone_name(z);
    zone.region = "local";
    int count = 0;
    for (int k = 0; k < nodes; ++k)
      if (k % zones == z)
        ++count;
    zone.gpus["CPU"] = count;
    c.zones.push_back(zone);
    region.zones.push_back(zone.name);
  }
  c.regions.push_back(region);
  config::zone_link tmpl;
  tmpl.latency_s = 0.002;
  tmpl.bandwidth_gbytes_per_s = 0.1;
  if (!base.links.empty())
    tmpl = base.links.front();
  for (int a = 0; a < zones; ++a)
    for (int b = a + 1; b < zones; ++b) {
      auto l = tmpl;
      l.from = zone_name(a);
      l.to = zone_name(b);
      c.links.push_back(l);
    }
  return c;
}

std::optional<actors::cluster_status> query(caf::actor_system& system, const caf::actor& sup) {
  std::optional<actors::cluster_status> out;
  caf::scoped_actor self{system};
  self->request(sup, std::chrono::seconds{2}, actors::status_request{})
    .receive([&](actors::cluster_status& s) { out = std::move(s); }, [](caf::error&) {});
  return out;
}

// "[#####-----]": `done` of `total` in 20 characters.
std::string progress_bar(int done, int total) {
  constexpr int width = 20;
  const int filled = total > 0 ? std::clamp(done * width / total, 0, width) : 0;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '-') + "]";
}

int fail(const std::string& why) {
  std::fprintf(stderr, "sailor demo: error: %s\n", why.c_str());
  return 1;
}

int run_demo(const demo_args& args) {
  // Bad input exits 2 (exit_codes.hpp).
  if (args.nodes < 1 || args.zones < 1 || args.zones > 26 || args.zones > args.nodes) {
    fail("--zones must be between 1 and min(--nodes, 26), --nodes at least 1");
    return 2;
  }
  if (args.iterations < 1) {
    fail("--iterations must be at least 1");
    return 2;
  }
  if (args.preempt_at < 0 || args.preempt_at >= args.iterations)
    return fail("--preempt-at must be between 0 (never) and --iterations - 1");
  if (args.preempt_at > 0 && args.nodes < 2)
    return fail("--preempt-at needs at least 2 nodes (one is lost)");
  if (args.checkpoint_every < 0)
    return fail("--checkpoint-every must be 0 (never) or more");
  auto model = config::load_model(args.model);
  if (!model)
    return fail(model.error().to_string());
  auto job = config::load_job(args.job);
  if (!job)
    return fail(job.error().to_string());
  auto base = config::load_cluster(args.cluster);
  if (!base)
    return fail(base.error().to_string());
  std::optional<config::plan> fixed;
  if (!args.plan.empty()) {
    auto p = config::load_plan(args.plan, *model);
    if (!p)
      return fail(p.error().to_string());
    fixed = *p;
  }
  if (!base->gpus.find("CPU"))
    return fail(args.cluster + ": the catalog has no 'CPU' GPU type (the nodes' devices)");
  const auto cluster = make_cluster(*base, args.nodes, args.zones);

  std::string node_binary = args.node_binary;
  if (node_binary.empty())
    node_binary = (fs::read_symlink("/proc/self/exe").parent_path() / "sailor-node").string();
  if (access(node_binary.c_str(), X_OK) != 0)
    return fail("cannot run " + node_binary + " (build it, or give --node-binary)");

  char tmpl[] = "/tmp/sailor-demo-XXXXXX";
  if (!mkdtemp(tmpl))
    return fail("cannot create a temporary folder");
  const fs::path work = tmpl;
  fs::create_directories(work);

  if (!args.verbose)
    log::get("actors")->set_level(spdlog::level::warn);

  // Ctrl-C / SIGTERM are taken by polling in the main loop, not by handlers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto interrupted = [&signals] {
    timespec zero{0, 0};
    return sigtimedwait(&signals, nullptr, &zero) > 0;
  };

  demo_events events;
  const auto start_time = clock_type::now();
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  std::vector<child> children;
  std::unique_ptr<actors::coordinator> coordinator;
  std::unique_ptr<dashboard> web;
  // Every exit goes through here: the coordinator tells the nodes to shut down, then the
  // children get a bounded time to leave before they are killed.
  auto cleanup = [&](int code) {
    web.reset();
    coordinator.reset();
    stop_children(children, std::chrono::seconds{3});
    if (code == 0 && !args.keep_logs) {
      std::error_code ec;
      fs::remove_all(work, ec);
    } else {
      std::fprintf(stderr, "sailor demo: node logs kept in %s\n", work.c_str());
    }
    return code;
  };

  actors::coordinator_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  for (auto& z : cluster.zones)
    options.supervisor.zones.push_back(z.name);
  options.supervisor.quorum = args.nodes;
  options.supervisor.settle = std::chrono::seconds{3600};  // the quorum starts planning
  // Generous: on a loaded 2-core machine a heartbeat can be late without the node being gone.
  options.supervisor.heartbeat_interval = std::chrono::milliseconds{500};
  options.supervisor.heartbeat_timeout = std::chrono::seconds{10};
  const int layers = model->num_all_layers();
  const auto shape = *model;
  const auto job_cfg = *job;
  options.plan = [&events, &cluster, fixed, layers, shape, job_cfg, &args, &node_binary,
                  &work](const actors::plan_request& request) -> result<config::plan> {
    config::plan p;
    if (fixed) {
      p = *fixed;
    } else {
      auto made = actors::even_plan(request.nodes, layers, job_cfg.global_batch);
      if (!made)
        return made.error();
      p = *made;
    }
    if (p.global_batch <= 0)
      p.global_batch = job_cfg.global_batch;
    simulator::sim_inputs in;
    in.model = shape;
    in.gpus = cluster.gpus;
    in.cluster = &cluster;
    in.job = job_cfg;
    // CPU devices: no CUDA context or NCCL buffers; our runtime overlaps sends with compute.
    simulator::sim_options sim;
    sim.framework_overhead_bytes = 0;
    sim.overlap_p2p = true;
    sim.p2p_partitioned = false;  // every receiving TP rank gets a full copy (executor.cpp)
    auto predict = [&](const config::model_profile* profile) -> result<simulator::estimate> {
      in.profile = profile;
      auto ctx = simulator::sim_context::make(in, sim);
      if (!ctx)
        return ctx.error();
      return simulator::simulate(*ctx, p);
    };
    // 1. Memory, and the analytic time, from the catalog alone (no need to profile a model
    //    that cannot run).
    //    The same check as `sailor coordinator --train-dir` (training_setup.hpp).
    if (auto why = memory_refusal(shape, p, cluster, job_cfg); !why.empty())
      return sailor::error{error_kind::invalid_input,
                           "the model does not fit a device's memory: " + why, "", 0, "plan"};
    double analytic = 0;
    std::string note;
    auto rough = predict(nullptr);
    if (rough)
      analytic = rough->iteration_time_s;
    // 2. The time from the model's measured profile on this machine.
    double predicted = analytic;
    note = rough ? "simulator, analytic CPU model from the catalog (rough)"
                 : "no prediction: " + rough.error().message;
    auto profile = obtain_profile({args.profile, args.model}, node_binary, work, p);
    if (profile) {
      // The profile times each layer as the executor runs it: nothing to remove per layer.
      sim.profile_layer_overhead_s = 0;
      // How our runtime communicates: one gradient all-reduce per layer, then the loss and
      // norm all-reduce over every rank.
      sim.allreduce_per_layer = true;
      sim.final_allreduce = true;
      // Every rank is a process of this machine: they share its cores (the profile is CPU
      // work; see obtain_profile).
      sim.host_cores = profile->host_cores;
      sim.cpu_per_message_s = profile->cpu_per_message_s;
      sim.cpu_per_collective_s = profile->cpu_per_collective_s;
      int ranks = 0;
      for (const auto& st : p.stages)
        for (const auto& r : st.replicas)
          ranks += std::max(1, r.tp);
      auto measured = predict(&profile->profile);
      if (measured) {
        predicted = measured->iteration_time_s;
        char buf[400];
        std::snprintf(buf, sizeof buf,
                      "simulator on this machine's profile (CPU work, measured by %d processes at "
                      "once), the %d ranks sharing %.2f cores, %.0f/%.0f us CPU per message/"
                      "all-reduce; pipeline %.4f s + gradient sync and update %.4f s",
                      ranks, ranks, profile->host_cores, profile->cpu_per_message_s * 1e6,
                      profile->cpu_per_collective_s * 1e6, measured->pipeline_s,
                      measured->sync_and_update_s);
        note = buf;
      } else {
        note += "; the profiled prediction failed: " + measured.error().message;
      }
    } else {
      note += "; profiling failed: " + profile.error().message;
    }
    std::lock_guard lock{events.mu};
    events.predicted_s = predicted;
    events.predicted_analytic_s = analytic;
    events.prediction_note = note;
    return p;
  };
  training_settings settings;
  settings.model = shape;
  settings.job = job_cfg;
  settings.work_dir = work.string();
  settings.iterations = args.iterations;
  settings.checkpoint_every = args.checkpoint_every;
  settings.timeout_ms = static_cast<std::int64_t>(args.stall_timeout_s * 1000);
  settings.links = cluster.links;
  options.supervisor.prepare_training = [&events, settings](
                                           actors::training_job& tj,
                                           const actors::checkpoint_holdings& held) {
    // Resumes from the newest complete checkpoint of an earlier plan, if any.
    if (!fill_training_job(tj, settings, held))
      return false;
    std::lock_guard lock{events.mu};
    tj.predicted_iteration_s = events.predicted_s;
    events.plan = tj.plan;
    ++events.plans;
    events.start_iteration = tj.start_iteration;
    events.finished = false;
    return true;
  };
  // A lost node's peers usually fail before the loss is noticed: give the supervisor time.
  options.supervisor.training_failure_grace = std::chrono::seconds{10};
  options.supervisor.on_iteration = [&events](const actors::iteration_record& r,
                                              const actors::training_progress& p) {
    std::lock_guard lock{events.mu};
    events.iterations.push_back(r);
    events.loss_curve = p.loss_curve();
    events.finished = p.finished();
    events.cv.notify_all();
  };
  options.supervisor.on_training_error = [&events](const std::string& why) {
    std::lock_guard lock{events.mu};
    if (events.error.empty())
      events.error = why;
    events.cv.notify_all();
  };
  auto board = std::make_shared<actors::status_board>();
  options.supervisor.board = board;
  auto started = actors::coordinator::start(system, std::move(options));
  if (!started)
    return cleanup(fail("coordinator: " + started.error().message));
  coordinator = std::move(*started);
  auto served = start_dashboard(args.dashboard, board, cluster, shape);
  if (!served)
    return cleanup(fail(served.error().message));
  web = std::move(*served);
  const auto port = coordinator->port();
  const caf::actor supervisor = coordinator->supervisor();

  std::printf("sailor demo: model %s (%lld parameters), %d nodes in %d zones (cluster %s), %d "
              "iterations\n",
              model->name.c_str(), static_cast<long long>(model->total_params()), args.nodes,
              args.zones, cluster.name.c_str(), args.iterations);
  std::printf("  coordinator on 127.0.0.1:%u; node logs in %s\n", static_cast<unsigned>(port),
              work.c_str());
  if (web)
    std::printf("  dashboard on %s\n", web->url().c_str());
  std::fflush(stdout);
  for (int k = 0; k < args.nodes; ++k) {
    child c;
    c.name = "node-" + std::to_string(k);
    c.log = (work / (c.name + ".log")).string();
    c.pid = spawn({node_binary, "--join", "127.0.0.1:" + std::to_string(port), "--zone",
                   zone_name(k % args.zones), "--devices", "cpu:1", "--name", c.name,
                   "--transport", "socket", "--state-dir", work.string(), "--log-dir",
                   ""},  // its log is c.log already
                  c.log);
    if (c.pid < 0)
      return cleanup(fail("cannot start " + node_binary));
    children.push_back(c);
  }

  auto child_died = [&]() -> std::string {
    if (auto* c = reap(children))
      return c->name + " exited with code " + std::to_string(c->exit_code) + "; its log:\n" +
             tail_of(c->log);
    return {};
  };

  // 1. Every node joins, bounded.
  const auto join_deadline =
    clock_type::now() + std::chrono::milliseconds{static_cast<long>(args.join_timeout_s * 1000)};
  int joined = 0;
  while (true) {
    if (interrupted())
      return cleanup(fail("interrupted"));
    if (auto why = child_died(); !why.empty())
      return cleanup(fail("before joining: " + why));
    auto st = query(system, supervisor);
    joined = st ? static_cast<int>(st->nodes.size()) : 0;
    if (joined >= args.nodes)
      break;
    if (clock_type::now() > join_deadline)
      return cleanup(fail(std::to_string(joined) + " of " + std::to_string(args.nodes) +
                          " nodes joined within " + std::to_string(args.join_timeout_s) + " s"));
    std::this_thread::sleep_for(std::chrono::milliseconds{50});  // polling the join count
  }
  const auto joined_time = clock_type::now();
  std::printf("  %d nodes joined in %.2f s\n", joined,
              std::chrono::duration<double>(joined_time - start_time).count());
  std::fflush(stdout);

  // 2. Training: one line per iteration; bounded by the stall timeout between iterations.
  //    A node that dies (or that --preempt-at kills) makes the supervisor re-plan over the
  //    others, which resume from the newest complete checkpoint: iterations after it are run
  //    again, and their new records replace the old ones.
  auto last_progress = clock_type::now();
  auto last_status = clock_type::now() - std::chrono::seconds{1};
  int plans_shown = 0;
  std::vector<actors::iteration_record> records;
  std::set<std::int64_t> warm_up;  // the first iteration each plan ran
  std::vector<double> loss_curve;
  double predicted = 0;
  std::string prediction_note;
  std::optional<config::plan> plan;
  int plans = 0, start_iteration = 0;
  std::vector<std::string> preempted;
  std::vector<int> resumed_at;
  // From the preemption to the first iteration the next plan completed: noticing the loss,
  // re-planning, profiling the new plan, rendezvous and restoring the checkpoint.
  std::optional<clock_type::time_point> preempted_time;
  double recovery_s = -1;
  auto live_children = [&] {
    int n = 0;
    for (const auto& c : children)
      n += c.exit_code == -1 ? 1 : 0;
    return n;
  };
  while (true) {
    std::deque<actors::iteration_record> fresh;
    bool finished = false;
    std::string error;
    {
      std::unique_lock lock{events.mu};
      events.cv.wait_for(lock, std::chrono::milliseconds{100}, [&] {
        return !events.iterations.empty() || events.finished || !events.error.empty();
      });
      fresh.swap(events.iterations);
      finished = events.finished;
      error = events.error;
      loss_curve = events.loss_curve;
      predicted = events.predicted_s;
      prediction_note = events.prediction_note;
      plan = events.plan;
      plans = events.plans;
      start_iteration = events.start_iteration;
    }
    if (plan && plans != plans_shown) {
      if (plans_shown == 0) {
        std::printf("  plan: %s\n  predicted iteration time %.4f s (%s)\n",
                    actors::describe_plan(*plan).c_str(), predicted, prediction_note.c_str());
      } else {
        resumed_at.push_back(start_iteration);
        std::printf("  re-plan %d over %d nodes: %s\n  predicted iteration time %.4f s; %s\n",
                    plans - 1, live_children(), actors::describe_plan(*plan).c_str(), predicted,
                    start_iteration > 0
                      ? ("resuming from the checkpoint after iteration " +
                         std::to_string(start_iteration))
                          .c_str()
                      : "no checkpoint: training starts afresh");
      }
      plans_shown = plans;
      warm_up.insert(start_iteration);
      std::fflush(stdout);
    }
    for (auto& r : fresh) {
      if (r.iteration < static_cast<std::int64_t>(records.size()))
        records.resize(static_cast<std::size_t>(r.iteration));  // run again after a resume
      double tps = r.measured_s > 0 ? static_cast<double>(r.tokens) / r.measured_s : 0;
      std::printf("  %s iteration %3lld/%d  loss %.4f  tokens/s %8.0f  predicted %.4f s  "
                  "measured %.4f s (compute %.4f, recv wait %.4f, all-reduce %.4f)\n",
                  progress_bar(static_cast<int>(r.iteration + 1), args.iterations).c_str(),
                  static_cast<long long>(r.iteration + 1), args.iterations, r.loss, tps,
                  predicted, r.measured_s, r.compute_s, r.recv_wait_s, r.all_reduce_s);
      records.push_back(r);
      last_progress = clock_type::now();
      if (preempted_time && recovery_s < 0 && plans > 1)
        recovery_s = std::chrono::duration<double>(last_progress - *preempted_time).count();
    }
    std::fflush(stdout);
    if (!error.empty())
      return cleanup(fail("training failed: " + error));
    if (finished && static_cast<int>(records.size()) >= args.iterations)
      break;
    if (interrupted())
      return cleanup(fail("interrupted after " + std::to_string(records.size()) +
                          " iterations"));
    if (args.preempt_at > 0 && preempted.empty() &&
        static_cast<int>(records.size()) >= args.preempt_at) {
      // The spot preemption: the newest node still running dies at once, without a word.
      for (auto c = children.rbegin(); c != children.rend(); ++c)
        if (c->exit_code == -1) {
          std::printf("  preempting %s (SIGKILL) after iteration %zu\n", c->name.c_str(),
                      records.size());
          std::fflush(stdout);
          kill(c->pid, SIGKILL);
          preempted_time = clock_type::now();
          preempted.push_back(c->name);
          break;
        }
    }
    while (auto* c = reap(children)) {
      const bool expected =
        std::find(preempted.begin(), preempted.end(), c->name) != preempted.end();
      if (!expected)
        std::printf("  %s exited with code %d; the supervisor re-plans over the others. Its "
                    "log:\n%s\n",
                    c->name.c_str(), c->exit_code, tail_of(c->log, 600).c_str());
      std::fflush(stdout);
      last_progress = clock_type::now();  // re-planning and profiling take their time
    }
    if (live_children() == 0)
      return cleanup(fail("every node exited after " + std::to_string(records.size()) +
                          " iterations"));
    if (clock_type::now() - last_status > std::chrono::milliseconds{500}) {
      last_status = clock_type::now();
      if (auto st = query(system, supervisor)) {
        if (st->phase == "waiting" || st->phase == "collecting")
          return cleanup(fail((records.empty() ? "refused before training: "
                                               : "no plan over the remaining nodes: ") +
                              st->plan_summary));
      }
    }
    if (clock_type::now() - last_progress >
        std::chrono::milliseconds{static_cast<long>(args.stall_timeout_s * 1000)})
      return cleanup(fail("training stalled: no iteration completed in " +
                          std::to_string(args.stall_timeout_s) + " s (" +
                          std::to_string(records.size()) + " done)"));
  }
  const double wall_s = std::chrono::duration<double>(clock_type::now() - start_time).count();

  // 3. Summary. The first iteration of each plan (warm-up: allocation, first rendezvous,
  // restoring a checkpoint) is left out of the measured mean when there are others.
  double sum = 0;
  std::int64_t tokens = 0;
  int counted = 0;
  for (std::size_t k = 0; k < records.size(); ++k) {
    if (warm_up.count(records[k].iteration) && records.size() > warm_up.size())
      continue;
    sum += records[k].measured_s;
    tokens += records[k].tokens;
    ++counted;
  }
  const double measured = counted ? sum / counted : 0;
  const double tokens_per_s = sum > 0 ? static_cast<double>(tokens) / sum : 0;
  const int replans = plans > 0 ? plans - 1 : 0;
  std::printf("\nsailor demo: done in %.1f s\n", wall_s);
  std::printf("  iterations completed   %zu of %d\n", records.size(), args.iterations);
  if (!loss_curve.empty())
    std::printf("  loss                   %.4f -> %.4f\n", loss_curve.front(), loss_curve.back());
  std::printf("  throughput             %.0f tokens/s (mean over %d iterations; each plan's "
              "first is left out)\n",
              tokens_per_s, counted);
  std::printf("  iteration time         measured %.4f s, predicted %.4f s (%s)\n", measured,
              predicted, prediction_note.c_str());
  {
    std::lock_guard lock{events.mu};
    if (events.predicted_analytic_s > 0 && events.predicted_analytic_s != predicted)
      std::printf("                         (the catalog's analytic CPU model alone said %.4f s)\n",
                  events.predicted_analytic_s);
  }
  std::printf("  re-plans               %d", replans);
  for (std::size_t k = 0; k < resumed_at.size(); ++k)
    std::printf("%s%s", k == 0 ? " (resumed from the checkpoint after iteration " : ", ",
                std::to_string(resumed_at[k]).c_str());
  std::printf("%s\n", resumed_at.empty() ? "" : ")");
  if (!preempted.empty())
    std::printf("  preempted              %s; the next plan completed an iteration %.2f s later "
                "(noticing, re-planning, profiling, rendezvous, restoring)\n",
                preempted.front().c_str(), recovery_s);
  std::printf("  note: transfers and all-reduces that cross emulated zones are held for the "
              "link's latency and bandwidth.\n");
  std::fflush(stdout);

  if (!args.summary_json.empty()) {
    nlohmann::json j;
    j["iterations_completed"] = records.size();
    j["loss_curve"] = loss_curve;
    j["tokens_per_s"] = tokens_per_s;
    j["predicted_iteration_s"] = predicted;
    {
      std::lock_guard lock{events.mu};
      j["predicted_iteration_s_analytic"] = events.predicted_analytic_s;
      j["prediction_note"] = events.prediction_note;
    }
    j["measured_iteration_s"] = measured;
    j["replans"] = replans;
    j["resumed_at"] = resumed_at;
    j["preempted"] = preempted;
    if (recovery_s >= 0)
      j["recovery_s"] = recovery_s;
    j["nodes"] = args.nodes;
    j["zones"] = args.zones;
    j["model"] = model->name;
    j["seed"] = job_cfg.seed;
    j["wall_s"] = wall_s;
    if (plan) {
      j["plan"]["stages"] = plan->num_stages();
      j["plan"]["micro_batch"] = plan->micro_batch;
      j["plan"]["global_batch"] = plan->global_batch;
      j["plan"]["summary"] = actors::describe_plan(*plan);
    }
    std::vector<double> times;
    for (auto& r : records)
      times.push_back(r.measured_s);
    j["measured_iteration_s_each"] = times;
    std::ofstream out(args.summary_json);
    out << j.dump(2) << "\n";
    if (!out)
      return cleanup(fail("cannot write " + args.summary_json));
  }
  if (web && args.dashboard_hold_s > 0) {
    std::printf("  dashboard on %s for %.0f s more (Ctrl-C ends it)\n", web->url().c_str(),
                args.dashboard_hold_s);
    std::fflush(stdout);
    const auto hold = std::chrono::duration<double>(args.dashboard_hold_s);
    timespec wait{static_cast<time_t>(args.dashboard_hold_s),
                  static_cast<long>((hold - std::chrono::floor<std::chrono::seconds>(hold)) /
                                    std::chrono::nanoseconds{1})};
    sigtimedwait(&signals, nullptr, &wait);  // returns early on SIGINT/SIGTERM
  }
  return cleanup(0);
}

}  // namespace

void add_demo(CLI::App& app, command_set& commands) {
  auto args = std::make_shared<demo_args>();
  auto* sub = app.add_subcommand("demo", "plan and train a tiny model in emulated zones");
  sub->add_option("--nodes", args->nodes, "sailor-node processes (one CPU device each)")
    ->capture_default_str();
  sub->add_option("--zones", args->zones, "emulated zones (nodes go round-robin)")
    ->capture_default_str();
  sub->add_option("--iterations", args->iterations, "training iterations")
    ->capture_default_str();
  sub->add_option("--summary-json", args->summary_json, "write the summary as JSON here");
  sub->add_option("--model", args->model, "model YAML")->capture_default_str();
  sub->add_option("--job", args->job, "job YAML (seed, global batch, optimizer)")
    ->capture_default_str();
  sub->add_option("--cluster", args->cluster,
                  "cluster YAML whose catalog (CPU type) and first link are used")
    ->capture_default_str();
  sub->add_option("--plan", args->plan, "a fixed plan YAML instead of the planner's");
  sub->add_option("--profile", args->profile,
                  "profile JSON cache: used if it covers the plan, else measured and written");
  sub->add_option("--node-binary", args->node_binary, "sailor-node (default: next to sailor)");
  sub->add_option("--join-timeout-s", args->join_timeout_s, "bound on the nodes joining")
    ->capture_default_str();
  sub->add_option("--stall-timeout-s", args->stall_timeout_s,
                  "bound on the wait for the next iteration")
    ->capture_default_str();
  sub->add_option("--preempt-at", args->preempt_at,
                  "kill the newest node (SIGKILL, as a spot preemption) after this many "
                  "iterations: the supervisor re-plans over the others, which resume from the "
                  "last checkpoint (0: never)")
    ->capture_default_str();
  sub->add_option("--checkpoint-every", args->checkpoint_every,
                  "checkpoint every this many iterations (asynchronously; 0: never, and a "
                  "re-plan starts afresh)")
    ->capture_default_str();
  add_dashboard_options(sub, args->dashboard);
  sub->add_option("--dashboard-hold", args->dashboard_hold_s,
                  "keep serving the dashboard this many seconds after training ends")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  sub->add_flag("--verbose", args->verbose, "log the supervisor's events");
  sub->add_flag("--keep-logs", args->keep_logs, "keep the node logs after a success");
  sub->callback([&commands, args] {
    commands.selected = [args] { return run_demo(*args); };
  });
}

}  // namespace sailor::app
