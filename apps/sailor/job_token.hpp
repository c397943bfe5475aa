#pragma once
// The job token of `sailor coordinator` and `sailor status` (comm/auth.hpp): one option for
// both, read the same way as sailor-node reads it.

#include <string>

#include <CLI/CLI.hpp>

#include "sailor/comm/transport.hpp"
#include "sailor/config/error.hpp"

namespace sailor::app {

/// Adds `--token-file FILE` to `sub`.
void add_token_option(CLI::App* sub, std::string& token_file);

/// Adds `--tls-cert`, `--tls-key` and `--tls-ca` (PEM files; all three or none) to `sub`.
void add_tls_options(CLI::App* sub, comm::transport_options::tls_files& tls);

/// The token for a process that talks over `transport`: from the file, else SAILOR_TOKEN,
/// else (when `generate_into` is not empty) the one in the file `generate_into` when it exists
/// (a coordinator started again keeps its job's token), else a fresh one written there (0600).
/// The file's path is printed on stdout for the nodes; the token itself never is.
result<std::string> job_token(const std::string& token_file, const std::string& generate_into,
                              const char* command);

}  // namespace sailor::app
