// The zone-affine scheduler (zone_affine.hpp) in charge of a job that trains: a coordinator
// in this process with that scheduler, four `sailor-node` processes in two zones (one CPU
// device each, over TCP on loopback with a fresh job token), the tiny GPT trained for a few
// iterations. Checks that the plan is the scheduler's (one pipeline per zone) and that the
// loss went down; every wait is bounded.
//
//   build/bin/zone_affine_training [--iterations N] [--model configs/models/tiny.yaml]
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <spawn.h>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "sailor/actors/placement.hpp"
#include "sailor/actors/runtime.hpp"
#include "sailor/comm/auth.hpp"
#include "sailor/config/load.hpp"
#include "sailor/config/private_files.hpp"
#include "zone_affine.hpp"

extern char** environ;

using namespace sailor::actors;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct outcome {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<double> losses;
  bool finished = false;
  std::string error;
  std::string plan;  ///< the plan trained first, and its shape
  int stages = 0, replicas = 0;
};

pid_t start_node(const fs::path& binary, std::uint16_t port, const std::string& name,
                 const std::string& zone, const fs::path& dir) {
  std::vector<std::string> args{binary.string(), "--join", "127.0.0.1:" + std::to_string(port),
                                "--zone", zone, "--name", name, "--devices", "cpu:1",
                                "--state-dir", (dir / name).string(),
                                "--token-file", (dir / "token").string(),
                                "--log-dir", (dir / "logs").string(), "--join-timeout", "20"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    return -1;
  return pid;
}

// Ends the node processes: SIGTERM, then SIGKILL after 5 s.
void stop_nodes(const std::vector<pid_t>& pids) {
  for (auto pid : pids)
    kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  for (auto pid : pids) {
    while (waitpid(pid, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
  }
}

// The job each plan trains (the model, N iterations) and what the run records of it: the first
// plan's shape, each iteration's loss, the end or the error.
void train_under_watch(supervisor_options& supervisor, const sailor::config::model_shape& model, int iterations,
                       const std::shared_ptr<outcome>& result) {
  supervisor.prepare_training = [shape = model, iterations, result](training_job& job,
                                                                    const checkpoint_holdings&) {
    {
      std::lock_guard<std::mutex> lock{result->mutex};
      if (result->plan.empty()) {
        result->plan = describe_plan(job.plan);
        result->stages = job.plan.num_stages();
        for (auto& stage : job.plan.stages)
          result->replicas += static_cast<int>(stage.replicas.size());
      }
    }
    job.model = shape;
    job.iterations = iterations;
    job.seed = 1234;
    job.timeout_ms = 20000;
    return true;
  };
  supervisor.on_iteration = [result](const iteration_record& r, const training_progress& p) {
    std::lock_guard<std::mutex> lock{result->mutex};
    result->losses.push_back(r.loss);
    std::printf("iteration %lld/%d  loss %.5f  %.3f s\n",
                static_cast<long long>(r.iteration + 1), p.iterations(), r.loss, r.measured_s);
    result->finished = p.finished();
    result->changed.notify_all();
  };
  supervisor.on_training_error = [result](const std::string& why) {
    std::lock_guard<std::mutex> lock{result->mutex};
    result->error = why;
    result->changed.notify_all();
  };
}

// Says whether the run did what the example promises; 0 when it did.
int verdict(const outcome& result) {
  if (!result.finished) {
    std::fprintf(stderr, "training did not finish within 25 s%s%s\n", result.error.empty() ? "" : ": ",
                 result.error.c_str());
  } else if (result.stages != 2 || result.replicas != 4) {
    std::fprintf(stderr, "the plan is not one pipeline of 2 stages per zone: %s\n", result.plan.c_str());
  } else if (!(result.losses.back() < result.losses.front())) {
    std::fprintf(stderr, "the loss did not go down: %.5f -> %.5f\n", result.losses.front(), result.losses.back());
  } else {
    std::printf("zone-affine plan: %s\nloss %.5f -> %.5f\n", result.plan.c_str(), result.losses.front(),
                result.losses.back());
    return 0;
  }
  return 1;
}

int usage(int status) {
  std::printf("usage: zone_affine_training [--iterations N] [--model FILE]\n\nTrains the tiny "
              "GPT (default %s) for N iterations (default 12) under the\nzone-affine "
              "scheduler, with four sailor-node processes in two zones; exit status 0\nwhen "
              "the loss went down, 77 when sailor-node is not built beside this program.\n",
              SAILOR_EXAMPLE_MODEL);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 12;
  std::string model_file = SAILOR_EXAMPLE_MODEL;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      return usage(0);
    if (arg == "--iterations" && i + 1 < argc && (iterations = std::atoi(argv[++i])) > 0)
      continue;
    if (arg == "--model" && i + 1 < argc) {
      model_file = argv[++i];
      continue;
    }
    std::fprintf(stderr, "zone_affine_training: bad argument '%s'\n", argv[i]);
    return usage(2);
  }
  auto node_binary = fs::absolute(fs::path(argv[0])).parent_path() / "sailor-node";
  if (!fs::exists(node_binary)) {
    std::printf("skipped: %s is not built (LibTorch missing?)\n", node_binary.c_str());
    return 77;
  }
  auto model = sailor::config::load_model(model_file);
  if (!model) {
    std::fprintf(stderr, "zone_affine_training: %s\n", model.error().to_string().c_str());
    return 2;
  }
  char dir_template[] = "/tmp/sailor-zone-affine-XXXXXX";
  fs::path dir = mkdtemp(dir_template);
  auto token = sailor::comm::generate_job_token();
  if (auto err = sailor::files::write_private_file(dir / "token", token + "\n")) {
    std::fprintf(stderr, "zone_affine_training: %s\n", err->message.c_str());
    return 1;
  }

  auto result = std::make_shared<outcome>();
  int status = 1;
  {
    runtime_config cfg;
    caf::actor_system system{cfg};
    auto transport = make_transport("tcp", "coordinator", "", token, "127.0.0.1");
    if (!transport) {
      std::fprintf(stderr, "transport: %s\n", transport.error().message.c_str());
      return 1;
    }
    coordinator_options options;
    options.transport = transport->get();
    options.supervisor.zones = {"local-a", "local-b"};
    options.supervisor.quorum = 4;
    options.supervisor.model_layers = model->num_all_layers();
    options.supervisor.scheduler = system.spawn(examples::zone_affine_scheduler);
    train_under_watch(options.supervisor, *model, iterations, result);
    auto coord = coordinator::start(system, options);
    if (!coord) {
      std::fprintf(stderr, "cannot start the coordinator: %s\n", coord.error().message.c_str());
      return 1;
    }
    std::vector<pid_t> pids;
    for (auto [name, zone] : {std::pair{"a1", "local-a"}, std::pair{"a2", "local-a"},
                              std::pair{"b1", "local-b"}, std::pair{"b2", "local-b"}})
      pids.push_back(start_node(node_binary, (*coord)->port(), name, zone, dir));
    {
      std::unique_lock<std::mutex> lock{result->mutex};
      result->changed.wait_for(lock, 25s, [&] { return result->finished || !result->error.empty(); });
    }
    stop_nodes(pids);
    std::lock_guard<std::mutex> lock{result->mutex};
    status = verdict(*result);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return status;
}
