// DiLoCo against synchronous data parallelism across a slow link (issue 40's bench): the
// char-LM recipe (configs/models/char-gpt-4x128.yaml, configs/jobs/tinyshakespeare-char.yaml)
// on two replicas, one in each of two emulated regions joined by a link of --latency-ms and
// --mbit (50 ms, 100 Mbit/s by default; comm's link shaper holds every byte that crosses it),
// every rank a thread of this process with one compute thread. Configurations, one JSON line
// each:
//   - one-region: both replicas in one zone, synchronous: the same GPUs inside one region,
//     the denominator of `utilisation`;
//   - sync: synchronous across the link. Its arithmetic is the one-region run's (the link
//     changes when bytes arrive, not what they are), so its val_loss is that run's
//     (`val_loss_of`); its speed and bytes are measured over --sync-iterations iterations and
//     its bytes scaled to the full run;
//   - diloco: H in --inner-steps (default 10 and 50), with --overlap and --fragments, and
//     --compression none|int8; at the end the exchanges in flight are finished, so that both
//     regions hold the same weights when validated.
// Keys: mode, inner_steps, compression, iterations, tokens_per_s, val_loss (after the same
// tokens), val_loss_of, cross_region_bytes (every byte the ranks' channels sent: with one
// stage, only the cross-region phases use them), utilisation (tokens/s over one-region's),
// seconds. Each DiLoCo run is followed by a one-region run again, and its utilisation is over
// the mean of the one-region runs on either side (the machine is shared).
//
//   diloco [--iterations N] [--sync-iterations N] [--inner-steps 10,50] [--overlap K]
//          [--fragments P] [--compression none|int8] [--outer-lr X] [--outer-momentum M]
//          [--latency-ms L] [--mbit B]
// Run from the repository root (the job's data path is relative to it).

#include <sailor/config/load.hpp>
#include <sailor/train/executor.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../tests/support/rank_threads.hpp"

namespace {

using namespace sailor;
using clock_type = std::chrono::steady_clock;

struct settings {
  config::model_shape model;
  config::job job;
  int iterations = 600;
  int sync_iterations = 20;
  std::vector<int> inner_steps{10, 50};
  config::data_parallel_options outer;
  config::zone_link link;
};

struct outcome {
  double seconds = 0;  // the training loop's, slowest rank
  double val_loss = 0;
  std::uint64_t channel_bytes = 0;  // every rank's
  std::string error;
};

config::plan plan_of(const settings& s, const std::string& zone_b, int inner_steps) {
  config::plan p;
  p.global_batch = s.job.global_batch;
  p.micro_batch = s.job.global_batch / 2;  // one micro-batch a replica
  config::stage_plan stage;
  stage.num_layers = s.model.num_all_layers();
  for (const auto& zone : {std::string{"region-a-1"}, zone_b}) {
    config::replica r;
    r.gpu_type = "cpu";
    r.zone = zone;
    stage.replicas.push_back(r);
  }
  p.stages.push_back(stage);
  if (inner_steps > 0)
    p.local_sgd = config::local_sgd_plan{inner_steps, {{"region-a", {"region-a-1"}}, {"region-b", {zone_b}}}};
  return p;
}

outcome train_plan(const settings& s, const config::plan& plan, int iterations, bool validate) {
  auto options = train::options_from(s.job);
  options.torch_threads = 1;
  options.links = {s.link};
  options.outer = s.outer;
  options.timeout = std::chrono::seconds{120};
  options.decay_iterations = std::min(options.decay_iterations, s.iterations);
  outcome out;
  std::mutex mu;
  auto errors = testing::run_rank_threads(
      s.model, plan, options,
      [&](int, train::stage_executor& exec) -> std::string {
        const auto start = clock_type::now();
        for (int it = 0; it < iterations; ++it)
          if (auto tel = exec.run_iteration(it); !tel) return tel.error().to_string();
        if (auto st = exec.finish_outer_steps(iterations)) return st->to_string();
        const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
        double loss = 0;
        if (validate) {
          auto v = exec.validation_loss();
          if (!v) return v.error().to_string();
          loss = *v;
        }
        std::lock_guard lock{mu};
        out.seconds = std::max(out.seconds, seconds);
        out.val_loss = loss;
        out.channel_bytes += exec.channel_bytes_sent();
        return {};
      },
      std::chrono::seconds{120});
  for (const auto& e : errors)
    if (!e.empty()) out.error = e;
  return out;
}

void print(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

int run(const settings& s) {
  const double tokens = double(s.job.global_batch) * s.model.sequence;
  std::fprintf(stderr, "diloco: %s, %d iterations of %d sequences, link %.0f ms / %.0f Mbit/s\n",
               s.model.name.c_str(), s.iterations, s.job.global_batch, s.link.latency_s * 1e3,
               s.link.bandwidth_gbytes_per_s * 8e3);
  auto one = train_plan(s, plan_of(s, "region-a-1", 0), s.iterations, true);
  if (!one.error.empty()) return std::fprintf(stderr, "one-region: %s\n", one.error.c_str()), 1;
  const double base = s.iterations * tokens / one.seconds;
  print({{"mode", "one-region"}, {"inner_steps", 1}, {"iterations", s.iterations}, {"tokens_per_s", base},
         {"val_loss", one.val_loss}, {"val_loss_of", "one-region"}, {"cross_region_bytes", one.channel_bytes},
         {"utilisation", 1.0}, {"seconds", one.seconds}});
  auto sync = train_plan(s, plan_of(s, "region-b-1", 0), s.sync_iterations, false);
  if (!sync.error.empty()) return std::fprintf(stderr, "sync: %s\n", sync.error.c_str()), 1;
  const double sync_bytes = double(sync.channel_bytes) * s.iterations / s.sync_iterations;
  print({{"mode", "sync"}, {"inner_steps", 1}, {"iterations", s.sync_iterations},
         {"tokens_per_s", s.sync_iterations * tokens / sync.seconds}, {"val_loss", one.val_loss},
         {"val_loss_of", "one-region"}, {"cross_region_bytes", sync_bytes},
         {"utilisation", s.sync_iterations * tokens / sync.seconds / base}, {"seconds", sync.seconds}});
  double before = base;
  for (int h : s.inner_steps) {
    auto d = train_plan(s, plan_of(s, "region-b-1", h), s.iterations, true);
    if (!d.error.empty()) return std::fprintf(stderr, "diloco H=%d: %s\n", h, d.error.c_str()), 1;
    const double speed = s.iterations * tokens / d.seconds;
    // The one-region run again after it: the machine is shared, so each DiLoCo run is
    // compared with the mean of the one-region runs on either side of it.
    auto again = train_plan(s, plan_of(s, "region-a-1", 0), s.iterations, false);
    if (!again.error.empty()) return std::fprintf(stderr, "one-region: %s\n", again.error.c_str()), 1;
    const double after = s.iterations * tokens / again.seconds;
    const double around = (before + after) / 2;
    before = after;
    print({{"mode", "diloco"}, {"inner_steps", h}, {"compression", config::to_string(s.outer.compression)},
           {"overlap_steps", s.outer.overlap_steps}, {"fragments", s.outer.fragments},
           {"outer_lr", s.outer.outer_lr}, {"outer_momentum", s.outer.outer_momentum},
           {"iterations", s.iterations}, {"tokens_per_s", speed}, {"val_loss", d.val_loss},
           {"val_loss_of", "diloco"}, {"val_loss_vs_sync", d.val_loss / one.val_loss - 1},
           {"cross_region_bytes", d.channel_bytes}, {"traffic_vs_sync", sync_bytes / std::max<double>(1, d.channel_bytes)},
           {"utilisation", speed / around}, {"one_region_tokens_per_s", around}, {"seconds", d.seconds}});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DiLoCo against synchronous data parallelism across an emulated slow link"};
  std::string model_path = "configs/models/char-gpt-4x128.yaml", job_path = "configs/jobs/tinyshakespeare-char.yaml";
  std::string compression = "none";
  double latency_ms = 50, mbit = 100;
  settings s;
  s.outer.across_regions = config::across_regions_mode::diloco;
  app.add_option("--model", model_path, "model file");
  app.add_option("--job", job_path, "job file (its data, batch and schedule)");
  app.add_option("--iterations", s.iterations, "iterations of the one-region and DiLoCo runs")->check(CLI::PositiveNumber);
  app.add_option("--sync-iterations", s.sync_iterations, "iterations the synchronous run across the link is timed over")
      ->check(CLI::PositiveNumber);
  app.add_option("--inner-steps", s.inner_steps, "DiLoCo's H, one run each")->delimiter(',');
  app.add_option("--overlap", s.outer.overlap_steps, "iterations an exchange overlaps (0: blocking)");
  app.add_option("--fragments", s.outer.fragments, "fragments exchanged apart (Streaming DiLoCo)");
  app.add_option("--outer-lr", s.outer.outer_lr, "the outer step's learning rate (DiLoCo's 0.7)");
  app.add_option("--outer-momentum", s.outer.outer_momentum, "the outer Nesterov momentum (DiLoCo's 0.9)");
  app.add_option("--compression", compression, "none or int8")->check(CLI::IsMember({"none", "int8"}));
  app.add_option("--latency-ms", latency_ms, "one-way latency between the regions");
  app.add_option("--mbit", mbit, "bandwidth between the regions, Mbit/s");
  CLI11_PARSE(app, argc, argv);
  auto model = config::load_model(model_path);
  if (!model) return std::fprintf(stderr, "%s\n", model.error().to_string().c_str()), 2;
  auto job = config::load_job(job_path);
  if (!job) return std::fprintf(stderr, "%s\n", job.error().to_string().c_str()), 2;
  s.model = *model;
  s.job = *job;
  s.outer.compression = compression == "int8" ? config::delta_compression::int8 : config::delta_compression::none;
  s.link.from = "region-a-1";
  s.link.to = "region-b-1";
  s.link.latency_s = latency_ms / 1e3;
  s.link.bandwidth_gbytes_per_s = mbit / 8e3;
  for (int h : s.inner_steps)
    if (h < 1 || s.outer.overlap_steps >= h || s.outer.fragments > h)
      return std::fprintf(stderr, "--inner-steps %d: needs H >= 1, --overlap < H and --fragments <= H\n", h), 2;
  return run(s);
}
