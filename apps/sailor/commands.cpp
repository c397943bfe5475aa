#include "commands.hpp"

#include <cstdio>

namespace sailor::app {

void add_not_built(CLI::App& app, command_set& commands, const char* name,
                   const char* description, const char* issue) {
  auto* sub = app.add_subcommand(name, std::string(description) + " (not built yet)");
  sub->allow_extras();
  sub->callback([&commands, name, issue] {
    commands.selected = [name, issue] {
      std::fprintf(stderr, "sailor %s: not built yet (%s)\n", name, issue);
      return 3;
    };
  });
}

void register_commands(CLI::App& app, command_set& commands) {
  add_plan(app, commands);
  add_simulate(app, commands);
  add_profile(app, commands);
  add_coordinator(app, commands);
  add_status(app, commands);
  add_demo(app, commands);
  add_replay(app, commands);
  add_validate(app, commands);
  add_export(app, commands);
}

}  // namespace sailor::app
