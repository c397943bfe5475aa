#include "node_recovery.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "sailor/train/checkpoint.hpp"
#include "sailor/train/checkpoint_files.hpp"
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

actors::train_report diverged_report(const actors::train_report& base, int iteration,
                                     const std::string& why, const std::string& checkpoint_file) {
  auto r = base;
  r.kind = static_cast<std::int32_t>(actors::report_kind::diverged);
  r.phase = "iteration";
  r.iteration = iteration;
  r.error = why;
  r.checkpoint_file = checkpoint_file;
  log::get("train")->error("[{} rank {}] iteration {}: {}", base.node, base.rank, iteration + 1,
                           why);
  return r;
}

actors::train_report not_kept(const actors::train_report& base, int completed) {
  auto r = base;
  r.kind = static_cast<std::int32_t>(actors::report_kind::snapshot);
  r.iteration = completed;
  r.error = "its state after iteration " + std::to_string(completed) +
            " led to a value that is not finite: not kept";
  return r;
}

bool restores_from_memory(const actors::training_job& job) {
  if (fs::path{job.restore_dir}.filename() == "mem")
    return true;
  return std::any_of(job.restore_files.begin(), job.restore_files.end(), [](const std::string& f) {
    return fs::path{f}.parent_path().parent_path().filename() == "mem";
  });
}

result<gathered_state> gather_state(const actors::training_job& job, int first_layer,
                                    int end_layer, const memory_shards* memory,
                                    const std::string& state_dir, comm::transport& transport,
                                    fetch_cancel* cancel) {
  gathered_state out;
  std::vector<shard_source> fetch;
  std::set<std::string> taken;
  for (std::size_t i = 0; i < job.restore_files.size() && i < job.restore_holders.size(); ++i) {
    const auto& path = job.restore_files[i];
    auto f = detail::parse_shard_file_name(fs::path{path}.filename().string());
    if (!f || f->end_layer <= first_layer || f->first_layer >= end_layer || taken.count(path))
      continue;
    if (auto held = memory ? memory->get(path) : nullptr) {
      out.bytes += static_cast<std::int64_t>(held->size());
      out.shards.push_back({path, {}, {std::span<const std::byte>{held->data(), held->size()}}});
      out.held.push_back(std::move(held));
      taken.insert(path);
      continue;
    }
    std::error_code ec;
    const auto local = fs::path{state_dir} / path;
    if (!state_dir.empty() && fs::is_regular_file(local, ec)) {
      if (const auto size = fs::file_size(local, ec); !ec)
        out.bytes += static_cast<std::int64_t>(size);
      out.shards.push_back({path, local.string(), {}});
      taken.insert(path);
      continue;
    }
    fetch.push_back({path, job.restore_holders[i]});
  }
  // Every holder of a shard to fetch, not only the first listed: a large one comes in parts.
  auto received = fetch_into_memory(transport, fetch, std::chrono::milliseconds{job.timeout_ms},
                                    &out.fetched_bytes, cancel);
  if (!received)
    return received.error();
  out.received = std::move(*received);
  out.bytes += out.fetched_bytes;
  for (const auto& r : out.received)
    out.shards.push_back({r.path, {}, r.spans()});
  return out;
}

std::optional<std::string> handover_target(const actors::training_job& job,
                                           const actors::stage_role& role,
                                           const std::string& node) {
  if (role.stage < 0 || role.stage >= job.plan.num_stages())
    return std::nullopt;
  std::set<std::string> own_stage;
  for (const auto& r : job.plan.stages.at(static_cast<std::size_t>(role.stage)).replicas)
    own_stage.insert(r.nodes.begin(), r.nodes.end());
  std::vector<std::string> others;  // nodes of the plan without a role in this stage
  for (const auto& stage : job.plan.stages)
    for (const auto& r : stage.replicas)
      for (const auto& n : r.nodes)
        if (!own_stage.count(n) && std::find(others.begin(), others.end(), n) == others.end())
          others.push_back(n);
  std::vector<std::string> same;  // the other nodes of this stage
  for (const auto& n : own_stage)
    if (n != node)
      same.push_back(n);
  const auto& pick = others.empty() ? same : others;
  if (pick.empty())
    return std::nullopt;
  const auto& target = pick[static_cast<std::size_t>(std::max(0, role.replica)) % pick.size()];
  for (std::size_t i = 0; i < job.peer_nodes.size() && i < job.peer_addresses.size(); ++i)
    if (job.peer_nodes[i] == target)
      return job.peer_addresses[i];
  return std::nullopt;
}

plan_members plan_members_of(const actors::training_job& job) {
  plan_members p;
  p.version = job.plan_version;
  p.checkpoint_dir = job.checkpoint_dir;
  p.start_iteration = job.start_iteration;
  p.end_iteration = job.iterations;
  std::map<std::string, std::vector<std::pair<int, int>>> layers;
  for (const auto& stage : job.plan.stages)
    for (const auto& r : stage.replicas)
      for (const auto& n : r.nodes)
        layers[n].emplace_back(stage.first_layer, stage.end_layer());
  p.nodes.assign(layers.begin(), layers.end());
  return p;
}

actors::train_report handover_report(const std::string& node, const std::string& path,
                                     std::int64_t bytes) {
  actors::train_report r;
  r.kind = static_cast<std::int32_t>(actors::report_kind::snapshot);
  r.phase = handover_path(path) ? "handover" : "copy";
  r.plan_version = 0;
  r.node = node;
  r.rank = -1;
  r.checkpoint_file = path;
  r.bytes = bytes;
  return r;
}

}  // namespace sailor::train
