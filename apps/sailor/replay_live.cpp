// `sailor replay --live` (see replay_live.hpp): the trace's script (planner/spot_live.hpp)
// played on the processes of a local run (local_cluster.hpp, local_setup.hpp).
#include "replay_live.hpp"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <optional>

#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "live_planning.hpp"
#include "local_setup.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/log.hpp"
#include "sailor/planner/spot_live.hpp"
#include "share_dir.hpp"

namespace sailor::app {
namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

int replay_live_failed(const std::string& why, int code = exit_failed) {
  std::fprintf(stderr, "sailor replay: error: %s\n", why.c_str());
  return code;
}

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A node of the replay: started for a column, stopped by the trace (or gone by itself).
struct live_node {
  std::string name;
  int column = 0;
  clock_type::time_point started;
  std::optional<clock_type::time_point> stopped;
};

// Real seconds of the replay by what the job was doing.
struct time_split {
  double starting = 0, training = 0, recovering = 0, waiting = 0;
  /// Of `recovering`: until the old plan's last iteration after a change (it trains on through
  /// a notice until the next plan is handed out); the rest the job was stopped.
  double trained_while_recovering = 0;
};

// The replay in progress: what it was asked, its processes and its record.
struct live_run {
  live_run(const live_replay_options& o, const planner::live_script& s, local_cluster& c, std::string binary)
      : opt(o), script(s), cluster(c), node_binary(std::move(binary)) {}
  const live_replay_options& opt;
  const planner::live_script& script;
  local_cluster& cluster;
  std::string node_binary;
  std::vector<live_node> nodes;
  json changes = json::array();
  int next_name = 0;
  int started = 0, stopped_notice = 0, stopped_kill = 0, exited_alone = 0, waits = 0;
  int restarts = 0, restarted_nodes = 0;  // restart_from_checkpoint: full restarts, nodes killed by them
  time_split time;
  clock_type::time_point t0, last_change, last_iteration;
  bool trained = false;
  int plans_at_change = -1;  // the job's plan count at the last change; -1: recovered since
  int plans_trained = 0;     // the job's plan count at its last completed iteration
  clock_type::time_point recovery_mark;  // the change, or the old plan's last iteration after it
  std::optional<clock_type::time_point> slice_end;  // then only a recovery in progress finishes
  std::string phase;

  double trace_s(clock_type::time_point at) const { return seconds_between(t0, at) * opt.time_scale; }
  std::string zone_of(int column) const {
    const auto& c = script.columns[static_cast<std::size_t>(column)];
    return c.gpu_type + "@" + c.zone;
  }
  int live_in(int column) const {
    int n = 0;
    for (const auto& node : nodes) n += !node.stopped && node.column == column ? 1 : 0;
    return n;
  }
  bool restarts_on_change() const { return opt.policy == planner::spot_policy::restart_from_checkpoint; }
  int live() const {
    int n = 0;
    for (const auto& node : nodes) n += node.stopped ? 0 : 1;
    return n;
  }
};

status start_node(live_run& r, int column) {
  const std::string name = local_zone_name(column) + "-" + std::to_string(++r.next_name);
  if (auto err = r.cluster.spawn_node(r.node_binary, name, local_zone_name(column))) return err;
  r.nodes.push_back({name, column, clock_type::now(), std::nullopt});
  ++r.started;
  return {};
}

// Stops one node: SIGTERM (it hands its state over in its grace period) or SIGKILL.
void stop_node(live_run& r, live_node& n, bool notice, local_progress& progress) {
  n.stopped = clock_type::now();
  for (auto& c : r.cluster.children())
    if (c.name == n.name && c.exit_code == -1) kill(c.pid, notice ? SIGTERM : SIGKILL);
  progress.preempted(n.name);
}

// Stops the column's newest node (see stop_node). Returns its name.
std::string stop_newest(live_run& r, int column, bool notice, local_progress& progress) {
  for (auto n = r.nodes.rbegin(); n != r.nodes.rend(); ++n) {
    if (n->stopped || n->column != column) continue;
    stop_node(r, *n, notice, progress);
    ++(notice ? r.stopped_notice : r.stopped_kill);
    return n->name;
  }
  return {};
}

// restart_from_checkpoint, after the changes of one moment: every node that ran before them is
// killed and one is started in its place, so the whole job starts again from the newest
// checkpoint (the nodes just started for a rise are new already). Printed and recorded.
status restart_every_node(live_run& r, clock_type::time_point changed, local_progress& progress) {
  std::vector<int> columns;
  const std::size_t count = r.nodes.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (r.nodes[i].stopped || r.nodes[i].started >= changed) continue;
    stop_node(r, r.nodes[i], false, progress);
    columns.push_back(r.nodes[i].column);
  }
  if (columns.empty()) return {};  // nothing ran before: the job waits for capacity
  json j = json::array();
  for (int column : columns) {
    if (auto err = start_node(r, column)) return err;
    j.push_back(r.nodes.back().name);
  }
  ++r.restarts;
  r.restarted_nodes += static_cast<int>(columns.size());
  if (!r.changes.empty()) r.changes.back()["restarted_as"] = j;
  std::printf("  restart from the checkpoint: %zu node(s) killed and started again\n", columns.size());
  std::fflush(stdout);
  return {};
}

// One change of the script, played now.
status apply_change(live_run& r, const planner::live_change& ch, local_progress& progress) {
  const int before = r.live_in(ch.column);
  json j{{"tick", r.script.from_tick + ch.tick}, {"trace_s", ch.at_s}, {"zone", r.zone_of(ch.column)},
         {"emulated_zone", local_zone_name(ch.column)}, {"before", before},
         {"iterations_done", progress.done()}};
  std::string what;
  for (int i = 0; i < -ch.delta; ++i) {
    // A restart kills every node anyway: a notice hands nothing over.
    const bool notice = i >= ch.without_notice && !r.restarts_on_change();
    auto name = stop_newest(r, ch.column, notice, progress);
    if (name.empty()) break;
    j["stopped"].push_back({{"node", name}, {"notice", notice}});
    what += " stop " + name + (notice ? " (SIGTERM: a notice)" : " (SIGKILL)");
  }
  for (int i = 0; i < ch.delta; ++i) {
    if (auto err = start_node(r, ch.column)) return err;
    j["started"].push_back(r.nodes.back().name);
    what += " start " + r.nodes.back().name;
  }
  j["after"] = r.live_in(ch.column);
  r.changes.push_back(j);
  r.last_change = clock_type::now();
  std::printf("  trace %.0f s (tick %d): %s %d -> %d:%s\n", ch.at_s, r.script.from_tick + ch.tick,
              r.zone_of(ch.column).c_str(), before, r.live_in(ch.column), what.c_str());
  if (r.live() == 0) {
    ++r.waits;
    std::printf("  every node is gone: waiting for capacity\n");
  }
  std::fflush(stdout);
  return {};
}

// A node that exited by itself (not stopped by the trace) no longer runs nor costs.
void reap_nodes(live_run& r) {
  while (auto* c = reap(r.cluster.children())) {
    for (auto& n : r.nodes)
      if (n.name == c->name && !n.stopped) {
        n.stopped = clock_type::now();
        ++r.exited_alone;
        std::printf("  %s exited with code %d by itself; its log:\n%s\n", c->name.c_str(), c->exit_code,
                    tail_of(c->log, 600).c_str());
        std::fflush(stdout);
      }
  }
}

// The supervisor's phase (every half second); after every node was lost, the first to come
// back is planned for at once (the quorum was the slice's first count).
void watch_supervisor(live_run& r, clock_type::time_point& last_query) {
  if (clock_type::now() - last_query < std::chrono::milliseconds{500}) return;
  last_query = clock_type::now();
  auto st = r.cluster.query();
  if (!st) return;
  r.phase = st->phase;
  if (r.phase == "collecting" && !st->nodes.empty() && r.trained) {
    caf::scoped_actor self{r.cluster.system()};
    self->request(r.cluster.supervisor(), std::chrono::seconds{2}, actors::replan_now{"capacity returned"})
        .receive([](const actors::scheduler_answer&) {}, [](caf::error&) {});
  }
}

// Adds `dt` real seconds to what the job was doing.
void account(live_run& r, double dt) {
  // A full restart leaves the supervisor collecting until the new nodes joined: restarting,
  // not waiting for capacity.
  const bool restarting = r.restarts_on_change() && r.plans_at_change >= 0;
  const bool idle = (r.phase == "collecting" || r.phase == "waiting") && !restarting;
  if (r.live() == 0 || idle) r.time.waiting += dt;
  else if (r.plans_at_change >= 0) r.time.recovering += dt;
  else r.time.training += dt;
}

int plans_of(training_events& events) {
  std::lock_guard lock{events.mu};
  return events.plans;
}

// Until the first iteration completed (the plan made, profiled and started): the trace's clock
// starts then, so that the slice is played on a training job. Bounded by the stall timeout.
int wait_for_training(live_run& r, training_events& events, local_progress& progress) {
  const auto start = clock_type::now();
  const auto limit = std::chrono::milliseconds{static_cast<long>(r.opt.stall_timeout_s * 1000)};
  while (progress.done() == 0) {
    const std::string error = progress.take(events, r.live());
    if (!error.empty()) return replay_live_failed("training failed: " + error);
    if (r.cluster.interrupted()) return replay_live_failed("interrupted before training");
    reap_nodes(r);
    if (r.live() == 0) return replay_live_failed("every node exited before training");
    if (clock_type::now() - start > limit)
      return replay_live_failed("training did not start within " + std::to_string(r.opt.stall_timeout_s) + " s (--stall-timeout)");
  }
  r.t0 = r.last_change = r.last_iteration = clock_type::now();
  r.trained = true;
  r.time.starting = seconds_between(start, r.t0);
  for (auto& n : r.nodes) n.started = std::max(n.started, r.t0);  // the slice pays from its start
  return exit_done;
}

// Plays the script until the slice's end (or the job's last iteration); an exit code.
int replay_loop(live_run& r, training_events& events, local_progress& progress) {
  if (int code = wait_for_training(r, events, progress); code != exit_done) return code;
  std::size_t next = 0;
  auto last_pass = clock_type::now(), last_query = last_pass - std::chrono::seconds{1};
  while (true) {
    const int before = static_cast<int>(progress.records().size());
    const auto before_last = progress.last_progress();
    const std::string error = progress.take(events, r.live());
    const int plans = plans_of(events);
    const bool completed = static_cast<int>(progress.records().size()) != before;
    if (completed || progress.last_progress() != before_last) r.last_iteration = progress.last_progress();
    // Recovered at the new plan's first completed iteration (not at a mere sign of life: a
    // re-plan's profiling touches the progress too).
    const auto now = clock_type::now();
    if (completed && r.plans_at_change >= 0 && plans == r.plans_at_change && !r.slice_end) {
      r.time.trained_while_recovering += seconds_between(r.recovery_mark, now);  // the old plan still trains
      r.recovery_mark = now;
    }
    if (completed && plans > r.plans_at_change) r.plans_at_change = -1;
    if (completed) r.plans_trained = plans;
    if (!r.slice_end) account(r, seconds_between(last_pass, now));
    last_pass = now;
    if (!error.empty()) return replay_live_failed("training failed: " + error);
    if (progress.finished()) {
      std::printf("  the job's %d iterations done at trace %.0f s\n", progress.total(), r.trace_s(now));
      return exit_done;
    }
    if (!r.slice_end && r.trace_s(now) >= r.script.end_s) {
      r.slice_end = now;
      if (r.plans_at_change >= 0 && r.live() > 0)
        std::printf("  the slice ended while recovering: waiting (up to --stall-timeout) for the next plan's first "
                    "iteration\n");
    }
    // The summary is of a settled job: a recovery in progress at the slice's end is finished,
    // and so is a newer plan (a node that joined without a change of the trace: the second of
    // two that came back) that has not completed an iteration yet.
    const bool settled = r.plans_at_change < 0 && plans == r.plans_trained;
    if (r.slice_end && (settled || r.live() == 0)) return exit_done;
    if (r.cluster.interrupted()) return replay_live_failed("interrupted after " + std::to_string(progress.done()) + " iterations");
    const std::size_t first = next;
    for (; !r.slice_end && next < r.script.changes.size() && r.script.changes[next].at_s <= r.trace_s(now); ++next) {
      if (auto err = apply_change(r, r.script.changes[next], progress)) return replay_live_failed(err->message);
      if (r.plans_at_change < 0) r.recovery_mark = now;
      r.plans_at_change = plans;  // recovering until a newer plan completes an iteration
    }
    if (next != first && r.restarts_on_change())
      if (auto err = restart_every_node(r, now, progress)) return replay_live_failed(err->message);
    reap_nodes(r);
    watch_supervisor(r, last_query);
    const auto quiet = now - std::max(r.last_iteration, r.last_change);
    const bool idle = r.live() == 0 || r.phase == "collecting" || r.phase == "waiting";
    if (!idle &&
        quiet > std::chrono::milliseconds{static_cast<long>(r.opt.stall_timeout_s * 1000)})
      return replay_live_failed("training stalled: no iteration completed in " + std::to_string(r.opt.stall_timeout_s) +
                  " s with nodes running (" + std::to_string(progress.done()) + " done)");
  }
}

// The GPU-hours of each column in trace time, from each node's start to its stop.
std::vector<planner::gpu_usage> usage_of(const live_run& r, clock_type::time_point end) {
  std::vector<planner::gpu_usage> out;
  for (const auto& c : r.script.columns) out.push_back({c.gpu_type, c.zone, 0});
  for (const auto& n : r.nodes) {
    const double real_s = seconds_between(n.started, n.stopped ? std::min(*n.stopped, end) : end);
    out[static_cast<std::size_t>(n.column)].gpu_hours += std::max(0.0, real_s) * r.opt.time_scale / 3600;
  }
  return out;
}

json summary_of(const live_run& r, const local_progress& progress, const config::gpu_catalog& catalog,
                clock_type::time_point end) {
  const double after_s = r.slice_end ? seconds_between(*r.slice_end, end) : 0;
  if (r.slice_end) end = *r.slice_end;  // GPU-hours and time: the slice's
  auto j = progress.summary_json(seconds_between(r.t0, end));
  j["recovery_after_slice_s"] = after_s;  // a recovery in progress at the end, finished
  j["completed_iterations"] = progress.done();
  j["seconds"] = {{"starting", r.time.starting}, {"training", r.time.training},
                  {"recovering", r.time.recovering}, {"waiting_for_capacity", r.time.waiting},
                  {"recovering_trained", r.time.trained_while_recovering},
                  {"recovering_stopped", std::max(0.0, r.time.recovering - r.time.trained_while_recovering)}};
  const double s = r.opt.time_scale;
  j["trace_seconds"] = {{"training", r.time.training * s},
                        {"recovering", r.time.recovering * s}, {"waiting_for_capacity", r.time.waiting * s}};
  j["waits_for_capacity"] = r.waits;
  const auto usage = usage_of(r, end);
  double total = 0;
  j["gpu_hours"] = json::array();
  for (std::size_t c = 0; c < usage.size(); ++c) {
    j["gpu_hours"].push_back({{"gpu_type", usage[c].gpu_type}, {"zone", usage[c].zone},
                              {"emulated_zone", local_zone_name(static_cast<int>(c))},
                              {"gpu_hours", usage[c].gpu_hours}});
    total += usage[c].gpu_hours;
  }
  j["gpu_hours_total"] = total;
  std::vector<std::string> unpriced;
  const auto dollars = planner::price_usage(usage, catalog, &unpriced);
  j["dollars"] = {{"spot", dollars.spot}, {"on_demand", dollars.on_demand}, {"unpriced_gpu_types", unpriced}};
  j["iterations_per_dollar"] = dollars.spot > 0 ? progress.done() / dollars.spot : 0.0;
  j["nodes_started"] = {{"initially", r.script.initial_nodes()}, {"by_the_trace", r.started - r.script.initial_nodes()}};
  j["nodes_stopped"] = {{"with_notice", r.stopped_notice}, {"without_notice", r.stopped_kill},
                        {"exited_by_themselves", r.exited_alone}};
  j["policy"] = planner::to_string(r.opt.policy);
  j["restarts"] = {{"full_restarts", r.restarts}, {"nodes_killed_and_started_again", r.restarted_nodes}};
  j["changes"] = r.changes;
  j["slice"] = {{"from_tick", r.script.from_tick}, {"to_tick", r.script.from_tick + static_cast<int>(r.script.start_s.size())},
                {"span_s", r.script.end_s}, {"replayed_s", std::min(r.script.end_s, r.trace_s(end))}};
  j["time_scale"] = s;
  j["nodes_per_zone"] = r.opt.nodes_per_zone;
  j["kill_fraction"] = r.opt.kill_fraction;
  j["seed"] = r.opt.seed;
  return j;
}

void print_summary(const json& j) {
  std::printf("live replay: %d iterations completed, %d lost, %d re-plans; real s: starting %.1f, training %.1f, "
              "recovering %.1f (stopped %.1f), waiting for capacity %.1f (%d waits)\n",
              j["completed_iterations"].get<int>(), j.value("lost_iterations", 0), j["replans"].get<int>(),
              j["seconds"]["starting"].get<double>(), j["seconds"]["training"].get<double>(),
              j["seconds"]["recovering"].get<double>(), j["seconds"]["recovering_stopped"].get<double>(),
              j["seconds"]["waiting_for_capacity"].get<double>(),
              j["waits_for_capacity"].get<int>());
  for (const auto& g : j["gpu_hours"])
    std::printf("  %s@%s (%s): %.2f GPU-hours\n", g["gpu_type"].get<std::string>().c_str(),
                g["zone"].get<std::string>().c_str(), g["emulated_zone"].get<std::string>().c_str(),
                g["gpu_hours"].get<double>());
  std::printf("  dollars: $%.2f at spot prices, $%.2f at on-demand prices\n", j["dollars"]["spot"].get<double>(),
              j["dollars"]["on_demand"].get<double>());
  std::fflush(stdout);
}

// The trace's catalog (the --cluster's, else the built-in one), the timeline and its script.
result<planner::live_script> load_script(const live_replay_options& opt, config::cluster& prices) {
  if (!opt.cluster.empty()) {
    auto c = config::load_cluster(opt.cluster);
    if (!c) return c.error();
    prices = std::move(*c);
  }
  auto t = planner::read_traces(opt.traces, prices.gpus);
  if (!t) return t.error();
  planner::live_slice_options so{opt.from_tick, opt.to_tick, opt.nodes_per_zone, opt.kill_fraction, opt.seed};
  auto script = planner::make_live_script(*t, so);
  if (!script) return script.error();
  planner::add_on_demand_pools(*script, prices, opt.nodes_per_zone);  // none without --cluster
  if (script->columns.size() > 26)
    return sailor::error{error_kind::invalid_input,
                         "at most 26 columns (emulated zones) in a live replay, the trace's and the cluster's "
                         "on-demand pools together",
                         "", 0, "--trace"};
  // Unknown GPU types and zones, checked on the slice's first tick (which has capacity).
  auto head = *t;
  head.counts = {t->counts[static_cast<std::size_t>(opt.from_tick)]};
  head.start_s = {0};
  if (auto err = planner::check_timeline(head, prices, !opt.cluster.empty())) return *err;
  return script;
}

local_run_args local_args_for(const live_replay_options& opt, const planner::live_script& script) {
  local_run_args args;
  args.command = "replay";
  args.zones = static_cast<int>(script.columns.size());
  args.nodes = opt.nodes_per_zone * args.zones;  // the zones' capacity: every count of the slice fits
  args.model = opt.model.empty() ? shipped_file("configs/models/tiny.yaml") : opt.model;
  args.job = opt.job.empty() ? shipped_file("configs/jobs/tiny.yaml") : opt.job;
  args.cluster = shipped_file("configs/clusters/local-2-zones.yaml");
  args.iterations = opt.iterations > 0 ? opt.iterations : 1000000;
  args.node_binary = opt.node_binary;
  args.profile_cache = opt.profile_cache;
  args.planner = "even";
  args.stall_timeout_s = opt.stall_timeout_s;
  args.verbose = opt.verbose;
  args.keep_logs = opt.keep_logs;
  return args;
}

int start_nodes(live_run& r) {
  for (std::size_t c = 0; c < r.script.columns.size(); ++c)
    for (int k = 0; k < r.script.nodes.front()[c]; ++k)
      if (auto err = start_node(r, static_cast<int>(c))) return replay_live_failed(err->message);
  std::printf("sailor replay --live: %zu zones, %d nodes at tick %d, %zu ticks over %.0f trace s at %.0fx "
              "(%.1f s); %d stops (%d without notice) and %d starts to come\n",
              r.script.columns.size(), r.script.initial_nodes(), r.script.from_tick, r.script.start_s.size(),
              r.script.end_s, r.opt.time_scale, r.script.end_s / r.opt.time_scale, r.script.stops,
              r.script.stops_without_notice, r.script.starts);
  std::fflush(stdout);
  if (auto err = r.cluster.wait_for_joins(r.script.initial_nodes(), r.opt.join_timeout_s)) return replay_live_failed(err->message);
  return exit_done;
}

}  // namespace

void add_live_replay_options(CLI::App* sub, live_replay_options& o) {
  sub->add_option("--nodes-per-zone", o.nodes_per_zone, "Live: at most this many nodes per column of the trace")
      ->check(CLI::PositiveNumber);
  sub->add_option("--time-scale", o.time_scale, "Live: trace seconds per real second (default 300)")
      ->check(positive_number());
  sub->add_option("--kill-fraction", o.kill_fraction, "Live: share of the stops without notice (SIGKILL)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option_function<std::string>(
         "--policy",
         [&o](const std::string& name) {
           o.policy = name == "ours" ? planner::spot_policy::ours : planner::spot_policy::restart_from_checkpoint;
         },
         "Live: ours (recover from the survivors, hand over at a notice) or restart_from_checkpoint "
         "(Sailor's and Varuna's way: every node killed and started again on every change)")
      ->check(CLI::IsMember({"ours", "restart_from_checkpoint"}));
  sub->add_option("--seed", o.seed, "Live: the seed that chooses the stops without notice");
  sub->add_option("--from", o.from_tick, "Live: the slice's first tick")->check(CLI::NonNegativeNumber);
  sub->add_option("--to", o.to_tick, "Live: the first tick after the slice (default: the trace's end)");
  sub->add_option("--iterations", o.iterations, "Live: stop after this many iterations (default: the slice's end)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--summary-json", o.summary_json, "Live: write the summary JSON here");
  sub->add_option("--node-binary", o.node_binary, "Live: the sailor-node program (default: beside this one)");
  sub->add_option("--profile-cache", o.profile_cache, "Live: folder of the profiles measured on this machine (kept)");
  sub->add_option("--stall-timeout", o.stall_timeout_s, "Live: fail when nodes run and no iteration completes this long (s)")
      ->check(positive_number());
  sub->add_flag("--keep-logs", o.keep_logs, "Live: keep the nodes' logs");
  sub->add_flag("--verbose", o.verbose, "Live: the runtime's log lines too");
}

int run_live_replay(const live_replay_options& opt) {
  if (opt.traces.empty()) return replay_live_failed("--trace: at least one trace file is required", exit_bad_input);
  config::cluster prices;
  auto script = load_script(opt, prices);
  if (!script) return replay_live_failed(script.error().to_string(), exit_bad_input);
  const auto args = local_args_for(opt, *script);
  for (const auto& [value, option] : {std::pair{args.model, "--model"}, std::pair{args.job, "--job"},
                                      std::pair{args.cluster, "the local cluster"}})
    if (auto err = check_shipped_default(value, option))
      return replay_live_failed(err->to_string(), exit_unavailable);
  training_events events;  // outlives the cluster: the supervisor's callbacks write it
  local_cluster cluster{args.command};
  if (auto err = cluster.make_work_dir()) return replay_live_failed(err->message);
  auto in = load_inputs(args, cluster.work());
  if (!in) {
    cluster.remove_work_dir();
    return replay_live_failed(in.error().to_string(), exit_bad_input);
  }
  if (!args.verbose) {
    log::get("actors")->set_level(spdlog::level::warn);
    log::get("train")->set_level(spdlog::level::warn);
  }
  cluster.take_signals();
  const auto settings = settings_for(*in, args, cluster.work());
  auto options = coordinator_options_for(*in, args, settings, events,
                                         planning_inputs_for(*in, args, cluster.work(), std::make_shared<live_loop>()));
  options.supervisor.quorum = script->initial_nodes();
  // Nodes that come and go as machines do: nothing shared but the network, and the job's
  // checkpoints kept by the coordinator, which outlasts them.
  cluster.nodes_share_nothing();
  if (auto err = cluster.start(std::move(options), args.dashboard, in->cluster, in->model))
    return cluster.cleanup(replay_live_failed(err->message), args.keep_logs);
  if (cluster.web()) std::printf("  dashboard on %s\n", cluster.web()->url().c_str());
  live_run r{opt, *script, cluster, in->node_binary};
  if (int code = start_nodes(r); code != exit_done) return cluster.cleanup(code, args.keep_logs);
  local_progress progress{in->iterations};
  const int code = replay_loop(r, events, progress);
  const auto end = clock_type::now();
  const auto summary = summary_of(r, progress, prices.gpus, end);
  if (code != exit_done) return cluster.cleanup(code, args.keep_logs);
  print_summary(summary);
  cluster.stop_processes();
  if (!opt.summary_json.empty()) {
    std::ofstream out(opt.summary_json);
    out << summary.dump(2) << "\n";
    if (!out) return cluster.cleanup(replay_live_failed("cannot write " + opt.summary_json), args.keep_logs);
  }
  return cluster.cleanup(exit_done, args.keep_logs);
}

}  // namespace sailor::app
