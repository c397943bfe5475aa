#include "node_recovery.hpp"

#include <chrono>
#include <filesystem>

#include "sailor/actors/train/checkpoint.hpp"
#include "sailor/config/log.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

std::string memory_state_path(const std::string& checkpoint_dir, int iterations,
                              const std::string& name) {
  const auto iteration_folder = fs::path{checkpoint_path("", iterations)}.filename();
  return (fs::path{checkpoint_dir}.parent_path() / "mem" / iteration_folder / name).string();
}

actors::train_report keep_state(memory_shards* memory, const actors::training_job& job,
                                const actors::train_report& base, const stage_executor& exec,
                                int completed) {
  auto r = base;
  r.kind = static_cast<std::int32_t>(actors::report_kind::snapshot);
  r.iteration = completed;
  if (!memory || job.checkpoint_dir.empty()) {
    r.error = !memory ? "the node keeps no state in memory" : "the job has no checkpoint folder";
    return r;
  }
  const auto start = std::chrono::steady_clock::now();
  auto shard = exec.state_snapshot(completed);
  if (!shard) {
    r.error = shard.error().message;
    log::get("train")->warn("[{} rank {}] keeps no state after iteration {}: {}", base.node,
                            base.rank, completed, r.error);
    return r;
  }
  r.checkpoint_file = memory_state_path(job.checkpoint_dir, completed, shard->name);
  r.bytes = static_cast<std::int64_t>(shard->bytes.size());
  memory->put(r.checkpoint_file, std::move(shard->bytes));
  log::get("train")->info("[{} rank {}] plan v{} ended after iteration {}: keeps its state in "
                          "memory ({} bytes, {:.3f} s) as {}",
                          base.node, base.rank, job.plan_version, completed, r.bytes,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                            .count(),
                          r.checkpoint_file);
  return r;
}

}  // namespace sailor::train
