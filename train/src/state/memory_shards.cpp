// State a node holds in memory (shard_service.hpp's memory_shards): its ranks' own, and what
// its peers handed over, within the budgets the shard server gives (shard_access.hpp).
#include "sailor/train/shard_service.hpp"

#include <filesystem>
#include <functional>

namespace sailor::train {

namespace fs = std::filesystem;

namespace {

// checkpoints/<job>/<folder> of checkpoints/<job>/<folder>/<iteration>/<shard>.
std::string folder_of(const std::string& path) {
  return fs::path{path}.parent_path().parent_path().string();
}

std::string iteration_of(const std::string& path) {
  return fs::path{path}.parent_path().filename().string();
}

}  // namespace

void memory_shards::set_handover_listener(handover_listener listener) {
  std::lock_guard lock{mu_};
  listener_ = std::move(listener);
}

void memory_shards::handed_over(const std::string& path, std::int64_t bytes) const {
  handover_listener listener;
  {
    std::lock_guard lock{mu_};
    listener = listener_;
  }
  if (listener)
    listener(path, bytes);
}

std::set<std::string> memory_shards::evicted_by(const std::string& path, int keep) const {
  const auto folder = folder_of(path);
  // The iteration folders of `folder` once `path` is in, newest first: those after the
  // newest `keep` go.
  std::set<std::string, std::greater<>> iterations{iteration_of(path)};
  for (const auto& [k, v] : held_)
    if (folder_of(k) == folder)
      iterations.insert(iteration_of(k));
  std::set<std::string> gone_iterations;
  int n = 0;
  for (const auto& it : iterations)
    if (++n > keep)
      gone_iterations.insert(it);
  std::set<std::string> gone;
  for (const auto& [k, v] : held_)
    if (folder_of(k) == folder && gone_iterations.count(iteration_of(k)))
      gone.insert(k);
  return gone;
}

void memory_shards::keep_newest(const std::string& path, int keep) {
  for (const auto& k : evicted_by(path, keep))
    held_.erase(k);
}

void memory_shards::put(const std::string& path, std::vector<std::byte> bytes, int keep) {
  std::lock_guard lock{mu_};
  held_[path] = {std::make_shared<const std::vector<std::byte>>(std::move(bytes)), {}};
  keep_newest(path, keep);
}

std::string memory_shards::hold_from(const std::string& from, const std::string& path,
                                     std::vector<std::byte> bytes, std::int64_t per_peer,
                                     std::int64_t max_held, int keep) {
  std::lock_guard lock{mu_};
  // What peers' hand-overs would take once `path` is in and what it pushes out is gone.
  auto gone = evicted_by(path, keep);
  gone.insert(path);  // replaced
  std::int64_t all = static_cast<std::int64_t>(bytes.size()), own = all;
  for (const auto& [k, v] : held_) {
    if (v.from.empty() || gone.count(k))
      continue;
    all += static_cast<std::int64_t>(v.bytes->size());
    if (v.from == from)
      own += static_cast<std::int64_t>(v.bytes->size());
  }
  const auto mib = [](std::int64_t n) { return std::to_string(n >> 20) + " MiB"; };
  if (own > per_peer)
    return "'" + from + "' would have " + mib(own) + " held here, over its budget of " +
           mib(per_peer);
  if (all > max_held)
    return "the state peers handed over would take " + mib(all) + " here, over the node's " +
           mib(max_held) + " (sailor-node --max-held-state)";
  held_[path] = {std::make_shared<const std::vector<std::byte>>(std::move(bytes)), from};
  keep_newest(path, keep);
  return {};
}

std::size_t memory_shards::drop_plan_folders(const std::string& job_dir,
                                             const std::vector<std::string>& keep) {
  const auto job = fs::path{job_dir}.lexically_normal();
  std::set<fs::path> kept;
  for (const auto& k : keep)
    kept.insert(fs::path{k}.lexically_normal());
  std::lock_guard lock{mu_};
  return std::erase_if(held_, [&](const auto& kv) {
    const auto folder = fs::path{kv.first}.parent_path().parent_path();
    return folder.parent_path() == job && folder.filename() != "mem" && !kept.count(folder);
  });
}

memory_shards::bytes_ptr memory_shards::get(const std::string& path) const {
  std::lock_guard lock{mu_};
  auto i = held_.find(path);
  return i == held_.end() ? nullptr : i->second.bytes;
}

std::size_t memory_shards::bytes() const {
  std::lock_guard lock{mu_};
  std::size_t n = 0;
  for (const auto& [k, v] : held_)
    n += v.bytes->size();
  return n;
}

std::vector<std::string> memory_shards::own_paths() const {
  std::lock_guard lock{mu_};
  std::vector<std::string> out;
  for (const auto& [path, held] : held_)
    if (held.from.empty())
      out.push_back(path);
  return out;
}

std::int64_t memory_shards::handed_over_bytes(const std::string& from) const {
  std::lock_guard lock{mu_};
  std::int64_t n = 0;
  for (const auto& [k, v] : held_)
    if (!v.from.empty() && (from.empty() || v.from == from))
      n += static_cast<std::int64_t>(v.bytes->size());
  return n;
}

}  // namespace sailor::train
