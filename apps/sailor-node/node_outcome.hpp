#pragma once
// How a sailor-node run ends and where it writes its log: the exit code of the way its last
// session with the coordinator ended (said on stderr), and its log file.

#include <string>

#include "sailor/actors/node_agent.hpp"

namespace sailor::node {

/// The exit code of a node whose last session ended with `outcome`: 0 the job finished or the
/// node left on a notice, 1 shut down before the job finished or the coordinator lost, 3
/// refused. What happened is said on stderr unless the node left on its own notice.
int exit_code_of(const actors::agent_outcome& outcome);

/// The node's log also goes to a file: `log_dir`/`name`.log when --log-dir was `given` (none
/// when it is ""), else node.log in `state_dir`, the run before's kept as node.previous.log
/// (two files however many runs). A file that cannot be written is said on stderr.
void log_to_folder(bool given, const std::string& log_dir, const std::string& name,
                   const std::string& state_dir);

}  // namespace sailor::node
