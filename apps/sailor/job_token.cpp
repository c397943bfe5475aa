#include "job_token.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sailor/comm/auth.hpp"
#include "sailor/config/private_files.hpp"

namespace sailor::app {

void add_token_option(CLI::App* sub, std::string& token_file) {
  sub->add_option("--token-file", token_file,
                  "file whose first line is the job token every process of the job proves in "
                  "the transport handshake (default: the SAILOR_TOKEN environment variable; the "
                  "coordinator then uses the one in --train-dir/job-token, or generates one there (or, without "
                  "--train-dir, in ~/.cache/sailor/coordinator/PORT.job-token) readable by you "
                  "only, and prints the file's path)");
}

void add_tls_options(CLI::App* sub, comm::transport_options::tls_files& tls) {
  sub->add_option("--tls-cert", tls.cert,
                  "TLS over --transport tcp: this process's certificate (PEM; with --tls-key and "
                  "--tls-ca). Every connection is then TLS 1.3 and both ends present a certificate "
                  "signed by the CA; scripts/make-tls-certs.sh makes a job's files")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-key", tls.key, "the private key of --tls-cert (PEM)")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-ca", tls.ca, "the CA that signed every process's certificate (PEM)")
      ->check(CLI::ExistingFile);
}

namespace {

// Puts a fresh token in `file` unless there is one: true when it did. The file appears whole
// or not at all (a hard link to a complete private temporary file), so a coordinator started
// at the same moment reads a whole token and never overwrites this one.
result<bool> create_token_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec))
    return false;
  if (!file.parent_path().empty())
    if (auto err = files::make_private_folder(file.parent_path()))
      return *err;
  const auto temp = file.string() + ".tmp-" + std::to_string(::getpid());
  if (auto err = files::write_private_file(temp, comm::generate_job_token() + "\n"))
    return *err;
  const bool linked = ::link(temp.c_str(), file.c_str()) == 0;
  const int why = errno;
  ::unlink(temp.c_str());
  if (!linked && why != EEXIST)
    return sailor::error::failed("cannot create " + file.string() + ": " + std::strerror(why));
  return linked;
}

}  // namespace

result<std::string> job_token(const std::string& token_file, const std::string& generate_into,
                              const char* command) {
  auto token = comm::load_job_token(token_file);
  if (!token || !token->empty() || generate_into.empty())
    return token;
  const std::filesystem::path file{generate_into};
  auto made = create_token_file(file);
  if (!made)
    return made.error();
  const char* how = *made ? "generated" : "kept from an earlier start";
  token = comm::load_job_token(generate_into);
  if (!token)
    return token;
  // The path, not the token: stdout ends up in terminals' scrollback and in logs.
  std::printf("%s: job token %s in %s (readable by you only; give it to the nodes and to "
              "`sailor status` with --token-file %s)\n",
              command, how, generate_into.c_str(), generate_into.c_str());
  std::fflush(stdout);
  return token;
}

}  // namespace sailor::app
