#include "node_outcome.hpp"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "sailor/config/log.hpp"

namespace sailor::node {

int exit_code_of(const actors::agent_outcome& outcome) {
  using kind = actors::agent_outcome::kind;
  const char* reason = outcome.reason.c_str();
  switch (outcome.how) {
    case kind::job_finished:
      std::fprintf(stderr, "sailor-node: shut down by the coordinator: %s\n", reason);
      return 0;
    case kind::preempted:
      return 0;
    case kind::shut_down:
      std::fprintf(stderr, "sailor-node: shut down by the coordinator before the job finished: %s\n",
                   reason);
      return 1;
    case kind::refused:
      std::fprintf(stderr, "sailor-node: refused by the coordinator: %s\n", reason);
      return 3;
    case kind::declared_lost:  // only when stopped meanwhile: it was leaving anyway
      std::fprintf(stderr, "sailor-node: declared lost by the coordinator: %s\n", reason);
      return 0;
    case kind::coordinator_lost:
    case kind::running:
      break;
  }
  std::fprintf(stderr, "sailor-node: lost the coordinator: %s\n", reason);
  return 1;
}

void log_to_folder(bool given, const std::string& log_dir, const std::string& name,
                   const std::string& state_dir) {
  namespace fs = std::filesystem;
  if (given && log_dir.empty())
    return;
  std::string file;
  if (given) {
    file = (fs::path{log_dir} / (name + ".log")).string();
  } else {
    const fs::path folder{state_dir};
    std::error_code none_yet;  // the first run has no log to keep
    fs::rename(folder / "node.log", folder / "node.previous.log", none_yet);
    file = (folder / "node.log").string();
  }
  if (log::add_file(file))
    log::get("actors")->info("[node {}] logging to {}", name, file);
  else
    std::fprintf(stderr, "sailor-node: --log-dir: cannot write %s; logging to stderr only\n", file.c_str());
}

}  // namespace sailor::node
