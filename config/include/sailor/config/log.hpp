#pragma once
/// One named spdlog logger per module: config, sim, planner, comm, actors, train.
/// Levels come from the environment: SPDLOG_LEVEL=info,comm=debug.

#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace sailor::log {

/// Creates the module loggers (stderr) and applies SPDLOG_LEVEL. Called once by main();
/// safe to call again.
void setup();

/// Also writes every module's lines to `path` (appending; the folder is created). Call after
/// setup() and before other threads log. Returns false (and logs nothing there) when the
/// file cannot be opened.
bool add_file(const std::string& path);

/// The logger of `module`, created on first use if setup() was not called (tests).
std::shared_ptr<spdlog::logger> get(const std::string& module);

}  // namespace sailor::log
