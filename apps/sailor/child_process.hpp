#pragma once
// Child processes of `sailor demo`: sailor-node processes (and profiling runs) started with
// their output in a log file, reaped as they exit, stopped within a bound.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace sailor::app {

/// A child process: the program in its own process group (Ctrl-C reaches the parent, which
/// stops it), killed if the parent dies, output to `log`. Returns its pid, or -1.
pid_t spawn(const std::vector<std::string>& argv_strings, const std::string& log);

/// The last `max_chars` characters of a file (a child's log), "" if it cannot be read.
std::string tail_of(const std::string& path, std::size_t max_chars = 1500);

struct child {
  std::string name;
  std::string log;
  pid_t pid = -1;
  int exit_code = -1;  ///< -1: running
};

/// Reaps children that exited; returns the first that exited (if any) since the last call.
child* reap(std::vector<child>& children);

/// Waits (bounded) for the children to leave by themselves, then SIGTERM, then SIGKILL.
void stop_children(std::vector<child>& children, std::chrono::milliseconds grace);

}  // namespace sailor::app
