// `sailor train` and `sailor demo`: the command lines (the run is local_run.cpp).
//
//   sailor train --model M.yaml --job J.yaml [--out DIR] [--nodes N] [--zones Z] [--summary-json FILE]
//   sailor train --resume DIR [--iterations N] [--nodes N] ...
//   sailor demo  [the same options, on built-in defaults: a small character-level GPT
//                trained on the quotes of Debian's fortunes-min package, ending with a
//                sample of its text; --model and --job run another job, --data another text]
#include <string>
#include <vector>

#include "commands.hpp"
#include "local_cluster.hpp"
#include "share_dir.hpp"

namespace sailor::app {

void add_local_run_options(CLI::App* sub, local_run_args& args) {
  args.cluster = shipped_file("configs/clusters/local-2-zones.yaml");
  sub->add_option("--nodes", args.nodes, "sailor-node processes (one CPU device each)")
    ->capture_default_str();
  sub->add_option("--zones", args.zones,
                  "emulated zones, 1 to min(--nodes, 26) (nodes go round-robin; default: "
                  "min(--nodes, 2))");
  sub->add_option("--regions", args.regions,
                  "emulated regions the zones are spread over in blocks (local-1, local-2, ...): "
                  "with a job whose data_parallel says across_regions: diloco, or that allows "
                  "local SGD, the regions train apart and exchange their progress every H "
                  "iterations (DiLoCo)")
    ->capture_default_str();
  sub->add_option("--region-link", args.region_link,
                  "the emulated link between zones of different regions, LATENCY_MS,MBPS "
                  "(megabytes per second)")
    ->capture_default_str();
  sub->add_option("--iterations", args.iterations,
                  "training iterations (0: the job file's 'iterations')")
    ->capture_default_str();
  sub->add_option("--summary-json", args.summary_json, "write the summary as JSON here");
  sub->add_option("--metrics-jsonl", args.metrics_jsonl,
                  "append one JSON line per completed iteration here (the figures of the "
                  "dashboard's /metrics)");
  sub->add_option("--data", args.data,
                  "train on this file instead of the job's data path (the job's format, or "
                  "text)");
  sub->add_option("--init-from", args.init_from,
                  "start from this Hugging Face checkpoint of the model (a .safetensors file, "
                  "or a folder with model.safetensors or model.safetensors.index.json) instead "
                  "of random weights: fine-tuning; overrides the job's init_from");
  sub->add_option("--cluster", args.cluster,
                  "cluster YAML whose catalog (CPU type) and first link are used")
    ->capture_default_str();
  sub->add_option("--plan", args.plan, "a fixed plan YAML instead of the planner's");
  sub->add_option("--profile", args.profile,
                  "profile JSON cache: used if it covers the plan, else measured and written");
  sub->add_option("--profile-cache", args.profile_cache,
                  "folder of profiles cached by device type, model and build (used when "
                  "--profile is not given)");
  sub->add_option("--planner", args.planner,
                  "search (the planner's search on the model's profile measured on this "
                  "machine and the emulated links) or even (layers split evenly)")
    ->capture_default_str();
  sub->add_option("--node-binary", args.node_binary, "sailor-node (default: next to sailor)");
  sub->add_option("--join-timeout-s", args.join_timeout_s, "bound on the nodes joining")
    ->capture_default_str();
  sub->add_option("--stall-timeout-s", args.stall_timeout_s,
                  "bound on the wait for the next iteration (and on a rank's wait for a peer)")
    ->capture_default_str();
  sub->add_option("--preempt-at", args.preempt_at,
                  "kill the newest node of the running plan (SIGKILL, as a spot preemption; "
                  "never a node the plan leaves idle) after this many iterations: the "
                  "supervisor re-plans over the others, which resume from the last checkpoint "
                  "(0: never)")
    ->capture_default_str();
  sub->add_option("--preempt-mode", args.preempt_mode,
                  "kill: SIGKILL, no word; notice: SIGTERM, a spot notice: the node hands over "
                  "its state before it leaves")
    ->check(CLI::IsMember({"kill", "notice"}))
    ->capture_default_str();
  sub->add_flag("--preempt-stage", args.preempt_stage,
                "preempt every replica of that node's stage (the whole stage)");
  sub->add_option("--checkpoint-every", args.checkpoint_every,
                  "checkpoint every this many iterations and after the last (asynchronously; "
                  "0: never, and a re-plan resumes from the ranks' memory, or afresh when no "
                  "rank kept its state)")
    ->capture_default_str();
  sub->add_option("--sample-prompt", args.sample_prompt,
                  "text jobs: the sample printed at the end continues this")
    ->capture_default_str();
  sub->add_option("--sample-tokens", args.sample_tokens,
                  "text jobs: characters of that sample (0: none)")
    ->capture_default_str();
  add_dashboard_options(sub, args.dashboard);
  sub->add_option("--dashboard-hold", args.dashboard_hold_s,
                  "keep serving the dashboard this many seconds after training ends")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  sub->add_option("--straggler-at", args.straggler_at,
                  "emulate a straggler: after this many iterations one node of the plan computes "
                  "--straggler-slowdown times slower (sailor-node --slowdown-file and SIGUSR2); "
                  "the job notices and re-plans around it when that pays (0: never)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  sub->add_option("--straggler-slowdown", args.straggler_slowdown,
                  "the straggler's compute stretched this many times")
    ->check(CLI::Range(1.0, 1000.0))
    ->capture_default_str();
  sub->add_option("--link-change-at", args.link_change_at,
                  "emulate a link change: after this many iterations every node shapes the "
                  "zone pair of --link-change with its new latency and bandwidth (sailor-node "
                  "--link-file and SIGUSR2); the job notices it in the all-reduces that cross "
                  "it and re-plans when that pays (0: never)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  sub->add_option("--link-change", args.link_change,
                  "the changed link, ZONE_A:ZONE_B=LATENCY_MS,MBPS (zones local-a, local-b, ...; "
                  "e.g. local-a:local-b=50,5)");
  sub->add_flag("--replan-on-drift", args.replan_on_drift,
                "re-plan when a node's measured compute runs 1.5x over its own earlier figure "
                "and the plan without it is predicted over 10% faster after the re-plan's cost "
                "(on with --straggler-at; off otherwise: on a loaded machine, noise alone "
                "reaches such factors)");
  sub->add_flag("--verbose", args.verbose, "log the supervisor's events");
  sub->add_flag("--keep-logs", args.keep_logs,
                "keep the node logs after a success (a run folder keeps them anyway)");
  sub->add_option("--resume", args.resume,
                  "continue the run in DIR (a run folder, after Ctrl-C or a failure) from its newest "
                  "complete checkpoint, with its model, job and options (those given here replace "
                  "them: other --nodes, --zones or --planner resume on another plan). --iterations "
                  "is the run's total counted from its start, not more on top: without it the run "
                  "trains to the total it was started with; a finished run trains on to a larger "
                  "--iterations")
    ->excludes("--out");
}

namespace {

// The options given on `sub`'s command line (--resume takes the others from the run).
std::vector<std::string> given_options(const CLI::App* sub) {
  std::vector<std::string> out;
  for (const auto* option : sub->get_options())
    if (option->count() > 0 && !option->get_lnames().empty())
      out.push_back("--" + option->get_lnames().front());
  return out;
}

}  // namespace

void add_train(CLI::App& app, command_set& commands) {
  auto args = std::make_shared<local_run_args>();
  args->command = "train";
  args->planner = "search";
  auto* sub = app.add_subcommand(
    "train", "run a job on this machine: a coordinator and N local sailor-node processes");
  args->default_out = true;
  sub->add_option("--model", args->model, "model YAML (required, unless --resume)");
  sub->add_option("--job", args->job, "job YAML (batch, data, schedule, iterations; required, unless --resume)");
  sub->add_option("--out", args->out,
                  "DIR: the run's folder, made here: its state (checkpoints, node logs) while it trains, "
                  "and at the end the trained model (DIR/model: model.safetensors, config.json, "
                  "vocab.json), which `sailor generate DIR` and `sailor export DIR` take. Kept after "
                  "success, failure or Ctrl-C; never an existing run's (default: "
                  "./sailor-runs/<job file's name>-<UTC time>, printed)");
  add_local_run_options(sub, *args);
  sub->footer("The run's folder (--out DIR):\n"
              "  DIR/model/  the trained model: model.safetensors (Hugging Face names), config.json,\n"
              "              sailor-model.yaml, vocab.json (a text job's characters)\n"
              "  DIR/state/  checkpoints (state/checkpoints/<job>/v<plan>/iter-<N>), node logs\n"
              "  DIR/run.json, model.yaml, job.yaml: what --resume DIR runs again\n"
              "  sailor generate DIR --prompt TEXT      sample text from it\n"
              "  sailor train --resume DIR              go on after Ctrl-C or a failure\n"
              "  sailor train --resume DIR --iterations N   train a finished run on to N in all");
  sub->callback([&commands, args, sub] {
    args->given = given_options(sub);
    commands.selected = [args] { return run_local_training(*args); };
  });
}

void add_demo(CLI::App& app, command_set& commands) {
  auto args = std::make_shared<local_run_args>();
  args->command = "demo";
  args->planner = "search";
  args->model = shipped_file("configs/models/char-fortunes.yaml");
  args->job = shipped_file("configs/jobs/fortunes-char.yaml");
  auto* sub = app.add_subcommand(
    "demo", "sailor train on built-in defaults: a small character-level GPT on the quotes of "
            "Debian's fortunes-min package, in emulated zones");
  sub->add_option("--model", args->model, "model YAML")->capture_default_str();
  sub->add_option("--job", args->job,
                  "job YAML (batch, data, schedule); the default trains on the fortunes-min "
                  "quotes, joined into one corpus")
    ->capture_default_str();
  sub->add_option("--out", args->out,
                  "keep the run in this folder, made here (as sailor train --out; default: a "
                  "temporary folder, removed after a success)");
  add_local_run_options(sub, *args);
  sub->callback([&commands, args, sub] {
    args->given = given_options(sub);
    // The built-in job's text is the joined quotes; another job keeps its own data.
    args->fortunes_corpus = sub->count("--job") == 0 && sub->count("--data") == 0;
    commands.selected = [args] { return run_local_training(*args); };
  });
}

}  // namespace sailor::app
