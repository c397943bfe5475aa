// `sailor`: plan, simulate, profile, coordinate and demo Sailor jobs. Subcommands register
// themselves in commands.hpp; this file only parses and dispatches.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"
#include "sailor/config/text.hpp"

#ifndef SAILOR_VERSION
#define SAILOR_VERSION "unknown"
#endif

namespace {

// Refuses a missing or unknown subcommand before CLI11 does (its message is the same
// "A subcommand is required" for both). Returns an exit code, or -1 to go on.
int check_subcommand(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  if (argc < 2) {
    std::fprintf(stderr, "sailor: a subcommand is required: %s (sailor --help tells more)\n", list.c_str());
    return sailor::app::exit_bad_input;
  }
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-' || std::find(names.begin(), names.end(), first) != names.end()) return -1;
  const std::string closest = sailor::closest_name(first, names);
  std::fprintf(stderr, "sailor: unknown subcommand '%s'%s; the subcommands are: %s\n", first.c_str(),
               closest.empty() ? "" : (" (did you mean '" + closest + "'?)").c_str(), list.c_str());
  return sailor::app::exit_bad_input;
}

}  // namespace

int main(int argc, char** argv) {
  sailor::files::restrict_new_files();  // checkpoints, logs, tokens and state: 0600 in 0700 folders
  sailor::log::setup();
  CLI::App app{std::string("sailor: plan and run the training of large models on heterogeneous, geo-distributed,\n"
                           "dynamic GPU capacity.\n\n"
                           "Subcommands:\n"
                           "  plan         choose GPUs, zones, stages, TP/DP and micro-batch for a job\n"
                           "  simulate     predict iteration time, per-GPU memory and cost of a plan\n"
                           "  profile      measure per-layer times of a model on this machine's devices\n"
                           "  coordinator  run the job supervisor that sailor-node processes join\n"
                           "  status       show the nodes, zones, roles and heartbeats of a coordinator\n"
                           "  train        run a job on this machine: a coordinator and N local nodes\n"
                           "  demo         sailor train on built-in defaults (a tiny model, emulated zones)\n"
                           "  replay       replay an availability trace through the planner\n"
                           "  validate     check config files and print what they hold\n"
                           "  export       write a checkpoint's model as safetensors with Hugging Face names\n"
                           "  generate     sample text from a checkpoint on the CPU\n\n") +
                   sailor::app::exit_codes_help,
               "sailor"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.set_version_flag("--version", "sailor " SAILOR_VERSION);
  sailor::app::command_set commands;
  sailor::app::register_commands(app, commands);
  if (int code = check_subcommand(app, argc, argv); code >= 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version exit 0; every other parse error is bad input.
    const int code = app.exit(e);
    return code == 0 ? 0 : sailor::app::exit_bad_input;
  }
  return commands.run();
}
