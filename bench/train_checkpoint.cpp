// The cost of plan-independent checkpoints: the time the training thread spends per
// checkpoint (copying parameters and optimizer state), the background write time, the bytes
// written, and the time to restore, for rank 0 of a two-stage plan (ranks as threads, Gloo on
// 127.0.0.1, one torch thread per rank).
//
//   train_checkpoint [--iterations N] [--opt350m-stage] [--blocks B] [--sequence S] [--dir D]
//
// Default: the tiny GPT split after layer 3. --opt350m-stage: rank 0 holds the first stage of
// OPT-350M under PP=4 (embedding + B = 6 blocks, hidden 1024, vocabulary 50272; the sequence is
// cut to S = 128 so the iterations run quickly on a CPU: it changes only the position table),
// rank 1 the head. Each checkpointed iteration is followed by flush_checkpoints(), timed: that
// is the background write, which in training overlaps the next iteration.

#include <sailor/train/checkpoint.hpp>
#include <sailor/train/executor.hpp>
#include <sailor/models/shapes.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <latch>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/arrive_on_exit.hpp"

namespace {

using namespace sailor;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

config::plan two_stages(const config::model_shape& m, int split) {
  config::plan p;
  p.micro_batch = 1;
  p.global_batch = 2;
  config::replica r;
  r.gpu_type = "cpu";
  config::stage_plan a, b;
  a.first_layer = 0;
  a.num_layers = split;
  a.replicas = {r};
  b.first_layer = split;
  b.num_layers = m.num_all_layers() - split;
  b.replicas = {r};
  p.stages = {a, b};
  return p;
}

struct rank_figures {
  std::vector<double> iteration_s, plain_iteration_s, checkpoint_s, write_s;
  double restore_s = 0;
  std::int64_t parameters = 0;
  std::string error;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::uintmax_t folder_bytes(const std::string& folder) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"checkpoint cost of the training executor"};
  int iterations = 3;
  bool opt350m = false;
  int blocks = 6, sequence = 128;
  std::string dir;
  app.add_option("--iterations", iterations, "checkpointed iterations (after 1 warm-up without)");
  app.add_flag("--opt350m-stage", opt350m, "an OPT-350M-shaped first stage");
  app.add_option("--blocks", blocks, "blocks of the OPT-350M stage");
  app.add_option("--sequence", sequence, "sequence length of the OPT-350M stage");
  app.add_option("--dir", dir, "checkpoint folder (default: a fresh one under /tmp, removed)");
  CLI11_PARSE(app, argc, argv);

  config::model_shape model = models::tiny_gpt_shape();
  int split = 3;
  if (opt350m) {
    model = models::opt_350m_shape(config::dtype::fp32);
    model.name = "OPT-350M-stage";
    model.num_layers = blocks;
    model.sequence = sequence;
    split = blocks + 1;  // embedding + blocks | head
  }
  const auto plan = two_stages(model, split);
  bool own_dir = dir.empty();
  if (own_dir) {
    std::random_device rd;
    dir = (fs::temp_directory_path() / ("sailor-bench-ckpt-" + std::to_string(rd()))).string();
  }

  const int n = train::world_size(plan);
  std::vector<rank_figures> figures(n);
  auto run = [&](bool restore) {
    comm::gloo_options gopts;
    gopts.in_process_store = comm::make_in_process_store();
    gopts.timeout = 600s;
    std::latch finished(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        std::unique_ptr<comm::communicator_factory> factory;
        std::unique_ptr<train::stage_executor> exec;
        sailor::testing::arrive_on_exit guard{finished};
        auto& f = figures[r];
        auto made_factory = comm::make_gloo_factory(r, gopts);
        if (!made_factory) return void(f.error = made_factory.error().to_string());
        factory = std::move(*made_factory);
        train::train_options o;
        o.torch_threads = 1;
        o.timeout = 600s;
        o.checkpoint_dir = dir;
        o.checkpoint_every = 1;
        auto made = train::stage_executor::create(model, plan, train::role_of(plan, r), *factory, o);
        if (!made) return void(f.error = made.error().to_string());
        exec = std::move(*made);
        f.parameters = exec->num_parameters();
        if (restore) {
          auto start = clock_type::now();
          if (auto st = exec->restore(dir, train::latest_checkpoint(dir)))
            return void(f.error = st->to_string());
          f.restore_s = seconds_since(start);
          return;
        }
        // Warm-up and a plain iteration (checkpoint_every = 1 checkpoints every iteration, so
        // the plain figure comes from the same executor's iteration minus its checkpoint).
        for (int it = 0; it < iterations + 1; ++it) {
          auto start = clock_type::now();
          auto tel = exec->run_iteration(it);
          if (!tel) return void(f.error = tel.error().to_string());
          const double iteration_s = seconds_since(start);
          auto flush_start = clock_type::now();
          if (auto st = exec->flush_checkpoints()) return void(f.error = st->to_string());
          const double write_s = seconds_since(flush_start);
          if (it == 0) continue;  // warm-up
          f.iteration_s.push_back(iteration_s);
          f.plain_iteration_s.push_back(iteration_s - tel->checkpoint_s);
          f.checkpoint_s.push_back(tel->checkpoint_s);
          f.write_s.push_back(write_s);
        }
      });
    }
    for (auto& t : threads) t.join();
  };
  run(false);
  const int latest = train::latest_checkpoint(dir);
  const auto bytes = folder_bytes(train::checkpoint_path(dir, latest));
  run(true);

  std::printf("model %s (hidden %d, %d blocks, vocabulary %d), plan PP=2 split at layer %d\n",
              model.name.c_str(), model.hidden, model.num_layers, model.vocabulary, split);
  std::printf("latest complete checkpoint: %d, %.1f MB on disk (both stages)\n", latest,
              bytes / 1e6);
  for (int r = 0; r < n; ++r) {
    const auto& f = figures[r];
    if (!f.error.empty()) {
      std::printf("rank %d failed: %s\n", r, f.error.c_str());
      continue;
    }
    const double mb = f.parameters * 12.0 / 1e6;  // params + AdamW's two moments, fp32
    std::printf(
        "rank %d: %.3f M parameters (%.1f MB of state): iteration %.3f s (%.3f s without the "
        "checkpoint), training thread per checkpoint %.4f s, background write %.3f s "
        "(%.0f MB/s), restore %.3f s\n",
        r, f.parameters / 1e6, mb, median(f.iteration_s), median(f.plain_iteration_s),
        median(f.checkpoint_s), median(f.write_s), mb / std::max(1e-9, median(f.write_s)),
        f.restore_s);
  }
  if (own_dir) fs::remove_all(dir);
  for (const auto& f : figures)
    if (!f.error.empty()) return 1;
  return 0;
}
