#pragma once
// The processes of a local test job and what they print: the command lines of `sailor
// coordinator` and `sailor-node` on the configs/ cluster of two local zones (the tiny model and
// job unless told otherwise), a coordinator started and its port awaited, the loss the
// coordinator printed per iteration, and the summary `sailor demo`/`sailor train` write with
// --summary-json. No LibTorch: the single-rank reference is tiny_reference.hpp's.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "run_command.hpp"

namespace sailor::testing {

/// A loopback port held bound but not listening until release(): a connection to it is
/// refused, as when no server is there, and no other process of a parallel test run is given
/// it meanwhile (a node started before its coordinator retries on it). port() is -1 when no
/// port could be had.
class held_port {
public:
  held_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not inherited by the processes started
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
      port_ = ntohs(sa.sin_port);
  }
  ~held_port() { release(); }
  held_port(const held_port&) = delete;
  held_port& operator=(const held_port&) = delete;

  int port() const { return port_; }
  /// Frees the port for the server about to bind it.
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
  int port_ = -1;
};

/// A loopback port free right now (a coordinator binds it a moment later); -1 when none.
inline int free_port() { return held_port{}.port(); }

/// `sailor coordinator` with the even planner listening on `listen`, on the two-zone local
/// cluster with the model and job files given (configs/'s tiny ones when empty); `extra`
/// options follow.
inline std::vector<std::string> coordinator_argv(const std::string& listen, const std::vector<std::string>& extra,
                                                 const std::string& model_file = "",
                                                 const std::string& job_file = "") {
  const std::string configs = configs_dir();
  std::vector<std::string> argv{sailor_bin(), "coordinator", "--planner", "even", "--listen", listen,
                                "--cluster", configs + "/clusters/local-2-zones.yaml",
                                "--model", model_file.empty() ? configs + "/models/tiny.yaml" : model_file,
                                "--job", job_file.empty() ? configs + "/jobs/tiny.yaml" : job_file};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

/// A coordinator that trains `iterations` iterations in `train_dir` once `quorum` nodes joined,
/// and exits when done; `extra` options follow.
inline std::vector<std::string> training_coordinator_argv(const std::string& listen, const std::string& train_dir,
                                                          int quorum, int iterations,
                                                          const std::vector<std::string>& extra) {
  auto argv = coordinator_argv(listen, {"--quorum", std::to_string(quorum), "--train-dir", train_dir,
                                        "--iterations", std::to_string(iterations), "--exit-when-done"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

/// `sailor-node` named `name` joining `join` (HOST:PORT) from `zone` with one CPU device over
/// TCP; `extra` options follow (token file, state folder, ...).
inline std::vector<std::string> node_argv(const std::string& join, const std::string& name, const std::string& zone,
                                          const std::vector<std::string>& extra) {
  std::vector<std::string> argv{sailor_bin("sailor-node"), "--join", join, "--zone", zone,
                                "--devices", "cpu:1", "--name", name, "--transport", "tcp"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

/// Starts `argv` (a coordinator) with its output in `out_prefix`.out and .err, and returns the
/// port it printed it listens on (on `host`); the test stops when it printed none.
inline std::string start_listening(std::unique_ptr<child>& process, const std::vector<std::string>& argv,
                                   const std::string& out_prefix, const std::string& host = "127.0.0.1") {
  process = std::make_unique<child>(argv, out_prefix + ".out", out_prefix + ".err");
  REQUIRE(process->pid() > 0);
  const std::string port = listening_port(*process, host);
  INFO(process->err());
  REQUIRE(!port.empty());
  return port;
}

/// The loss a coordinator printed last for each iteration ("iteration K/N  loss X"; an
/// iteration run again after a re-plan is printed again).
inline std::map<int, double> printed_losses(const std::string& out, int iterations) {
  std::map<int, double> loss;
  const std::regex line{"iteration ([0-9]+)/" + std::to_string(iterations) + "  loss ([-0-9.naif]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  return loss;
}

/// The micro-batch and global batch of the plan a coordinator printed.
inline std::pair<int, int> printed_batch(const std::string& out) {
  std::smatch batch;
  static const std::regex sizes{R"(micro-batch ([0-9]+), global batch ([0-9]+))"};
  REQUIRE(std::regex_search(out, batch, sizes));
  return {std::stoi(batch[1]), std::stoi(batch[2])};
}

/// Every iteration's loss within 1e-4 (relative) of the reference's.
inline void check_same_curve(const std::vector<double>& curve, const std::vector<double>& reference) {
  REQUIRE(curve.size() == reference.size());
  for (std::size_t k = 0; k < curve.size(); ++k) {
    INFO("iteration " << k + 1 << ": run " << curve[k] << ", reference " << reference[k]);
    CHECK(std::abs(curve[k] - reference[k]) <= 1e-4 * std::abs(reference[k]));
  }
}

/// The JSON in the file at `path`; the test stops when there is none.
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, "no file " << path);
  return nlohmann::json::parse(in);
}

/// Runs `command` (a `sailor` command line that takes --summary-json) within `timeout_s`,
/// requires it to succeed, and returns its output and the summary it wrote into `dir`.
struct summary_run {
  command_result result;
  nlohmann::json summary;
};
inline summary_run run_with_summary(const std::string& command, const temp_dir& dir, int timeout_s) {
  const auto path = dir.path("summary.json");
  summary_run run{run_command(command + " --summary-json " + path, timeout_s), {}};
  INFO(run.result.out);
  INFO(run.result.err);
  REQUIRE(run.result.exit_code == 0);
  run.summary = read_json(path);
  return run;
}

}  // namespace sailor::testing
