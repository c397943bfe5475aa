#pragma once
/// `sailor-node profile ...` (what `sailor profile` runs): the command line of the profiler in
/// sailor_train (train/profiler.hpp).

#include <string>
#include <vector>

namespace sailor::node {

/// Parses `args` (argv without the program name and the word `profile`), profiles the model on
/// this machine and writes the profile JSON (and, with --host-figures, the host's figures).
/// Returns the exit code: 0 done, 1 failed, 2 bad input.
int profile_command(const std::vector<std::string>& args);

}  // namespace sailor::node
