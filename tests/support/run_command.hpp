#pragma once
// Runs a command line in a shell with a time limit and captures its exit code, stdout and
// stderr. For integration tests of the command-line programs.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "strings.hpp"
#include "temp_file.hpp"

namespace sailor::testing {

struct command_result {
  int exit_code = -1;  ///< 124 when the time limit was hit (coreutils timeout)
  std::string out;
  std::string err;
};

inline command_result run_command(const std::string& command_line, int timeout_s = 60) {
  temp_dir dir;
  std::string out = dir.path("out"), err = dir.path("err");
  // What the command leaves in its temporary folder (a failed demo keeps its node logs there)
  // goes with `dir`.
  std::filesystem::create_directories(dir.path("tmp"));
  std::string full = "TMPDIR=" + dir.path("tmp") + " timeout -k 5 " + std::to_string(timeout_s) + " " + command_line +
                     " >" + out + " 2>" + err + " </dev/null";
  int status = std::system(full.c_str());
  command_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// Whether `text` holds `what`.

inline std::string sailor_bin(const std::string& name = "sailor") { return std::string(SAILOR_BIN_DIR) + "/" + name; }

}  // namespace sailor::testing
