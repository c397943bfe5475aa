#pragma once
// Subcommands of `sailor`. Each lives in its own file and adds itself to the CLI11 app.

#include <functional>

#include <CLI/CLI.hpp>

namespace sailor::app {

/// The action of the subcommand that was chosen.
struct command_set {
  std::function<int()> selected;
  int run() const { return selected ? selected() : 2; }  // 2: bad input (exit_codes.hpp)
};

void register_commands(CLI::App& app, command_set& commands);

/// Checks for numbers on the command line, with the messages the job file's checks give
/// ("--gbs: expected a positive number, got '0'"); a failed check exits 2 (bad input).
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// One function per subcommand, each in its own file.
void add_validate(CLI::App& app, command_set& commands);
void add_simulate(CLI::App& app, command_set& commands);
void add_plan(CLI::App& app, command_set& commands);
void add_profile(CLI::App& app, command_set& commands);
void add_coordinator(CLI::App& app, command_set& commands);
void add_status(CLI::App& app, command_set& commands);
void add_demo(CLI::App& app, command_set& commands);
void add_train(CLI::App& app, command_set& commands);  ///< demo.cpp
void add_replay(CLI::App& app, command_set& commands);
void add_export(CLI::App& app, command_set& commands);  ///< export and generate

/// A subcommand that is not built yet: says so plainly and exits non-zero.
void add_not_built(CLI::App& app, command_set& commands, const char* name,
                   const char* description, const char* issue);

}  // namespace sailor::app
