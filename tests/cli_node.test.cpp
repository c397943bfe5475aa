// What an operator meets (issue 19): sailor-node refuses devices and GPU types it cannot be,
// a coordinator that trains nothing says so, and `sailor status` leaves the coordinator's log
// clean. No LibTorch needed: the nodes here never train.
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/comm/cuda.hpp"

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cli_node {

using namespace std::chrono;
using namespace sailor::testing;

namespace {
const std::string configs = configs_dir();
// `sailor coordinator` without --train-dir on port 0 over TCP; returns its port.
std::string start_control_plane(std::unique_ptr<child>& coordinator, const temp_dir& dir) {
  return start_listening(coordinator,
                         coordinator_argv("127.0.0.1:0", {"--transport", "tcp", "--token-file", job_token_file(dir)}),
                         dir.path("coordinator"));
}
}  // namespace

TEST_CASE("sailor-node refuses a GPU type for CPU devices, and CUDA devices on a build without CUDA") {
  // Both are argument checks: the node exits before it tries to join.
  auto gpu = run_command(sailor_bin("sailor-node") + " --join 127.0.0.1:1 --zone local-a --devices cpu:1 --gpu-type H100-80", 60);
  CHECK(gpu.exit_code == 2);
  CHECK(contains(gpu.err, "--gpu-type: 'H100-80' names a GPU, but --devices cpu:1 are CPU cores"));
  // Without CUDA in the build, or without a usable GPU in the machine (CI has the toolkit but
  // no GPU), CUDA devices are refused with the reason; cuda:0 too (the machine is asked first).
  if (!sailor::comm::cuda_built()) {
    auto cuda = run_command(sailor_bin("sailor-node") + " --join 127.0.0.1:1 --zone local-a --devices cuda:1", 60);
    CHECK(cuda.exit_code == 2);
    CHECK(contains(cuda.err, "--devices: this sailor-node was built without CUDA"));
  } else if (auto gpus = sailor::comm::cuda_device_count(); !gpus) {
    for (const std::string devices : {"cuda:0", "cuda:1", "cuda:all"}) {
      auto cuda = run_command(sailor_bin("sailor-node") + " --join 127.0.0.1:1 --zone local-a --devices " + devices, 60);
      INFO(devices << ": " << cuda.err);
      CHECK(cuda.exit_code == 2);
      CHECK(contains(cuda.err, "--devices: '" + devices + "' asks for CUDA devices, but this machine has none usable: no CUDA device"));
    }
  }
}

TEST_CASE("sailor-node refuses --threads 0 and more threads than the host has cores, naming the option") {
  const std::string node = sailor_bin("sailor-node") + " --join 127.0.0.1:1 --zone local-a --join-timeout 1";
  auto zero = run_command(node + " --threads 0", 60);
  CHECK(zero.exit_code == 2);
  CHECK(contains(zero.err, "--threads: expected 1 to "));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  auto many = run_command(node + " --threads " + std::to_string(cores + 1), 60);
  CHECK(many.exit_code == 2);
  CHECK(contains(many.err, "(this host's cores), got " + std::to_string(cores + 1)));
  // A count the host has is taken: the node goes on to look for its coordinator.
  auto fits = run_command(node + " --threads " + std::to_string(cores), 60);
  CHECK(fits.exit_code != 2);
}

TEST_CASE("a coordinator without --train-dir says it trains nothing, and status calls leave its log clean") {
  temp_dir dir;
  std::unique_ptr<child> coordinator;
  const std::string port = start_control_plane(coordinator, dir);
  // Printed just after the "listening on" line the port came from: wait for it too.
  CHECK(eventually(10s, [&] { return contains(coordinator->out(), "control plane only (no --train-dir)"); }));
  for (int k = 0; k < 3; ++k) {
    auto st = run_command(sailor_bin() + " status 127.0.0.1:" + port + " --transport tcp --token-file " + job_token_file(dir) + " --json --timeout-ms 20000", 60);
    INFO(st.err);
    REQUIRE(st.exit_code == 0);
    // No "link closed" of its own.
    CHECK(!contains(st.err, "link closed"));
    CHECK(!contains(st.err, "[info]"));
    auto status = nlohmann::json::parse(st.out);
    bool said = false;
    for (const auto& e : status["events"]) said = said || contains(e.get<std::string>(), "nothing is trained");
    CHECK(said);
  }
  coordinator->signal(SIGTERM);
  CHECK(coordinator->wait_exit(10s) == 0);
  const std::string err = coordinator->err();
  INFO(err);
  CHECK_FALSE(contains(err, "link closed"));  // one per status call, before
  CHECK_FALSE(contains(err, "signal"));
  // A coordinator that does not answer: unavailable.
  auto gone = run_command(sailor_bin() + " status 127.0.0.1:" + port + " --transport tcp --token-file " + job_token_file(dir) + " --timeout-ms 2000", 60);
  CHECK(gone.exit_code == 3);
}

}  // namespace integration_cli_node
