// `sailor`: plan, simulate, profile, coordinate and demo Sailor jobs. Subcommands register
// themselves in commands.hpp; this file only parses and dispatches.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "sailor/config/log.hpp"

int main(int argc, char** argv) {
  sailor::log::setup();
  CLI::App app{
    "sailor: plan and run the training of large models on heterogeneous, geo-distributed,\n"
    "dynamic GPU capacity.\n\n"
    "Subcommands:\n"
    "  plan         choose GPUs, zones, stages, TP/DP and micro-batch for a job\n"
    "  simulate     predict iteration time, per-GPU memory and cost of a plan\n"
    "  profile      measure per-layer times of a model on this machine's devices\n"
    "  coordinator  run the job supervisor that sailor-node processes join\n"
    "  status       show the nodes, zones, roles and heartbeats of a coordinator\n"
    "  demo         plan and train a tiny model on this machine in emulated zones\n"
    "  replay       replay an availability trace through the planner\n"
    "  validate     check config files and print what they hold\n"
    "  export       write a checkpoint's model as safetensors with Hugging Face names\n"
    "  generate     sample text from a checkpoint on the CPU\n",
    "sailor"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  sailor::app::command_set commands;
  sailor::app::register_commands(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return commands.run();
}
