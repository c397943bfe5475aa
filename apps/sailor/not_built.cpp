// Subcommands whose implementation has not landed yet. Each moves to its own file when built.
#include "commands.hpp"

namespace sailor::app {

void add_profile(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "profile", "measure per-layer times on this machine",
                "the training runtime issue");
}

}  // namespace sailor::app
