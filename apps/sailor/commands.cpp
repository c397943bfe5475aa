#include "commands.hpp"

#include <cstdio>
#include <exception>
#include <string>

namespace sailor::app {

void add_not_built(CLI::App& app, command_set& commands, const char* name,
                   const char* description, const char* issue) {
  auto* sub = app.add_subcommand(name, std::string(description) + " (not built yet)");
  sub->allow_extras();
  sub->callback([&commands, name, issue] {
    commands.selected = [name, issue] {
      std::fprintf(stderr, "sailor %s: not built yet (%s)\n", name, issue);
      return 3;  // unavailable (exit_codes.hpp)
    };
  });
}

namespace {
CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
    [zero_allowed](std::string& text) -> std::string {
      double value = 0;
      std::size_t used = 0;
      try {
        value = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      const bool ok = used == text.size() && used > 0 && (zero_allowed ? value >= 0 : value > 0);
      return ok ? std::string() : std::string("expected a ") + (zero_allowed ? "non-negative" : "positive") +
                                      " number, got '" + text + "'";
    },
    zero_allowed ? "NUMBER >= 0" : "NUMBER > 0");
}
}  // namespace

CLI::Validator positive_number() { return number_check(false); }
CLI::Validator non_negative_number() { return number_check(true); }

void register_commands(CLI::App& app, command_set& commands) {
  add_plan(app, commands);
  add_simulate(app, commands);
  add_profile(app, commands);
  add_coordinator(app, commands);
  add_status(app, commands);
  add_demo(app, commands);
  add_train(app, commands);
  add_replay(app, commands);
  add_validate(app, commands);
  add_export(app, commands);
}

}  // namespace sailor::app
