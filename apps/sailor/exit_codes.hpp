#pragma once
// One exit-code scheme for every `sailor` subcommand, printed by `sailor --help`.

#include <cstdio>
#include <string>

#include "sailor/config/error.hpp"

namespace sailor::app {

enum exit_code : int {
  exit_done = 0,         ///< did what was asked
  exit_failed = 1,       ///< valid input, but it cannot be done or went wrong while doing it
  exit_bad_input = 2,    ///< a command line or config error; the message names option or file and field
  exit_unavailable = 3,  ///< something needed is not there or not answering
};

/// For `sailor --help`.
inline constexpr const char* exit_codes_help =
  "Exit codes (every subcommand):\n"
  "  0  done\n"
  "  1  failed: the input is valid but the job cannot be done (no plan satisfies it, the\n"
  "     model does not fit) or failed while running (training failed, a file not written)\n"
  "  2  bad input: an unknown option or subcommand, a value out of range, a config file that\n"
  "     is missing or wrong (the message names the option, or the file, line and field)\n"
  "  3  unavailable: a coordinator that does not answer, a program or feature not built\n";

/// The exit code for an error of `kind`.
inline int exit_code_for(error_kind kind) {
  switch (kind) {
    case error_kind::invalid_input:
    case error_kind::not_found:
      return exit_bad_input;
    case error_kind::disconnected:
    case error_kind::unimplemented:
      return exit_unavailable;
    case error_kind::infeasible:
    case error_kind::failed:
      break;
  }
  return exit_failed;
}

/// Prints "sailor COMMAND: error" on stderr, once, and returns its exit code.
inline int report_error(const char* command, const sailor::error& e) {
  std::fprintf(stderr, "sailor %s: %s\n", command, e.to_string().c_str());
  return exit_code_for(e.kind);
}

}  // namespace sailor::app
