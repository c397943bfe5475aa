#include "job_token.hpp"

#include <cstdio>

#include "sailor/comm/auth.hpp"

namespace sailor::app {

void add_token_option(CLI::App* sub, std::string& token_file) {
  sub->add_option("--token-file", token_file,
                  "file whose first line is the job token every process of the job proves in "
                  "the transport handshake (default: the SAILOR_TOKEN environment variable; the "
                  "coordinator generates and prints one when neither is given)");
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

result<std::string> job_token(const std::string& token_file, bool generate,
                              const char* command) {
  auto token = comm::load_job_token(token_file);
  if (!token || !token->empty() || !generate)
    return token;
  auto fresh = comm::generate_job_token();
  std::printf("%s: job token %s (give it to the nodes and to `sailor status` with "
              "--token-file FILE or %s)\n",
              command, fresh.c_str(), comm::token_environment_variable);
  std::fflush(stdout);
  return fresh;
}

}  // namespace sailor::app
