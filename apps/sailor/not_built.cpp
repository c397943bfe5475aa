// Subcommands whose implementation has not landed yet. Each moves to its own file when built.
#include "commands.hpp"

namespace sailor::app {

void add_plan(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "plan", "choose the best plan for a job", "the planner issue");
}
void add_profile(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "profile", "measure per-layer times on this machine",
                "the training runtime issue");
}
void add_replay(CLI::App& app, command_set& commands) {
  add_not_built(app, commands, "replay", "replay an availability trace through the planner",
                "the planner issue");
}

}  // namespace sailor::app
