// The executor across processes: this test program starts itself twice as the two ranks of a
// DP=2 x PP... plan (selected by environment variables), the ranks meet through a Gloo
// FileStore on 127.0.0.1, and their loss curve must match the same plan run as threads.

// Built only with LibTorch (the training executor); an empty program otherwise.
#if __has_include(<sailor/models/shapes.hpp>)

#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include <doctest/doctest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_processes {


namespace {

using namespace sailor;
using namespace std::chrono_literals;

constexpr int iterations = 6;

// PP=2 with TP 2 on the first stage: three ranks, p2p and TP all-reduces between processes.
config::plan plan_under_test() {
  config::plan p;
  p.micro_batch = 2;
  p.global_batch = 8;
  config::replica one, two;
  one.tp = 1;
  two.tp = 2;
  config::stage_plan a, b;
  a.first_layer = 0;
  a.num_layers = 3;
  a.replicas = {two};
  b.first_layer = 3;
  b.num_layers = 3;
  b.replicas = {one};
  p.stages = {a, b};
  return p;
}

train::train_options options() {
  train::train_options o;
  o.seed = 11;
  o.torch_threads = 1;
  o.timeout = 30s;
  return o;
}

// One rank; returns its losses or an error message.
std::vector<double> run_rank(int rank, const comm::gloo_options& gopts, std::string& err) {
  auto plan = plan_under_test();
  auto factory = comm::make_gloo_factory(rank, gopts);
  if (!factory) {
    err = factory.error().to_string();
    return {};
  }
  auto exec = train::stage_executor::create(models::tiny_gpt_shape(), plan,
                                            train::role_of(plan, rank), **factory, options());
  if (!exec) {
    err = exec.error().to_string();
    return {};
  }
  std::vector<double> losses;
  for (int it = 0; it < iterations; ++it) {
    auto tel = (*exec)->run_iteration(it);
    if (!tel) {
      err = tel.error().to_string();
      return {};
    }
    losses.push_back(tel->loss);
  }
  return losses;
}

}  // namespace

TEST_CASE("train: a plan run as processes matches the same plan run as threads") {
  if (const char* rank_env = std::getenv("SAILOR_TRAIN_TEST_RANK")) {
    // Child: one rank. Writes its losses for the parent.
    int rank = std::atoi(rank_env);
    comm::gloo_options gopts;
    gopts.store_path = std::getenv("SAILOR_TRAIN_TEST_STORE");
    gopts.timeout = 30s;
    std::string err;
    auto losses = run_rank(rank, gopts, err);
    REQUIRE_MESSAGE(err.empty(), err);
    std::ofstream out(gopts.store_path + "/losses." + std::to_string(rank));
    out.precision(17);
    for (double l : losses) out << l << "\n";
    return;
  }

  // Threads first (the reference), then processes.
  const int n = train::world_size(plan_under_test());
  std::vector<std::vector<double>> threaded(n);
  {
    comm::gloo_options gopts;
    gopts.in_process_store = comm::make_in_process_store();
    gopts.timeout = 30s;
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] { threaded[r] = run_rank(r, gopts, errors[r]); });
    for (auto& t : threads) t.join();
    for (auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
  }

  auto dir = std::filesystem::temp_directory_path() /
             ("sailor_train_processes_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env_strings = {"SAILOR_TRAIN_TEST_RANK=" + std::to_string(r),
                                            "SAILOR_TRAIN_TEST_STORE=" + dir.string()};
    std::vector<char*> env;
    for (auto& e : env_strings) env.push_back(e.data());
    for (char** e = environ; *e; ++e) env.push_back(*e);
    env.push_back(nullptr);
    std::string filter = "-tc=train: a plan run as processes*";
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t pid;
    REQUIRE(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, env.data()) == 0);
    pids.push_back(pid);
  }
  // Bounded wait: kill the ranks if they do not finish.
  auto deadline = std::chrono::steady_clock::now() + 120s;
  std::vector<int> exit_codes(n, -1);
  std::size_t finished = 0;
  while (finished < pids.size()) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (exit_codes[i] != -1) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        exit_codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        ++finished;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (exit_codes[i] == -1) kill(pids[i], SIGKILL);
      FAIL("ranks did not finish in time");
    }
    if (finished < pids.size()) std::this_thread::sleep_for(20ms);  // sleep override: polling a child's exit, bounded by the deadline
  }
  for (int r = 0; r < n; ++r) {
    CHECK(exit_codes[r] == 0);
    std::ifstream in(dir / ("losses." + std::to_string(r)));
    std::vector<double> got;
    for (double l; in >> l;) got.push_back(l);
    REQUIRE(got.size() == threaded[r].size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(std::abs(got[i] - threaded[r][i]) <= 1e-4 * std::abs(threaded[r][i]));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace integration_train_processes
#endif  // __has_include(<sailor/models/shapes.hpp>)
