// The checkpoint index: folder names, completeness and pruning (no LibTorch: the supervisor
// and the `sailor` app use it).

#include <sailor/train/checkpoint.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "sailor/train/checkpoint_files.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* folder_prefix = "iter-";

}  // namespace

std::string checkpoint_path(const std::string& dir, int iterations) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08d", folder_prefix, iterations);
  return (fs::path(dir) / name).string();
}

int latest_checkpoint(const std::string& dir) {
  auto all = detail::checkpoint_iterations(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (*it > 0 && !detail::inspect_folder(checkpoint_path(dir, *it)).complete.empty()) return *it;
  return 0;
}

namespace detail {

std::vector<std::string> plan_folders(const std::string& job_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator i{job_dir, ec}, end; !ec && i != end; i.increment(ec)) {
    const auto name = i->path().filename().string();
    std::error_code kind;
    if (name.size() >= 2 && name[0] == 'v' &&
        name.find_first_not_of("0123456789", 1) == std::string::npos && i->is_directory(kind))
      found.push_back(i->path().string());
  }
  return found;
}

}  // namespace detail

std::vector<std::string> remove_plan_folders(const std::string& job_dir,
                                             const std::vector<std::string>& keep) {
  // Lexically normal, without a trailing separator ("a/v4/" is "a/v4").
  auto normal = [](const fs::path& p) {
    auto n = p.lexically_normal();
    return (n.has_filename() ? n : n.parent_path()).string();
  };
  std::set<std::string> kept;
  for (const auto& k : keep)
    kept.insert(normal(k));
  std::vector<fs::path> doomed;  // listed first: no removal under a running iterator
  for (const auto& folder : detail::plan_folders(job_dir))
    if (!kept.count(normal(folder)))
      doomed.push_back(folder);
  // Copies of survivors' memory state fetched to disk (mem/iter-N, node_recovery.hpp) are
  // bounded too: the newest two iterations stay, as in memory (memory_shards), and any named
  // in `keep` (the checkpoint a pending plan restores). Without this a node's state folder
  // grew by one such copy per re-plan (bench/soak: 36 MiB per node in 10 minutes).
  const auto mem = (fs::path{job_dir} / "mem").string();
  const auto copies = detail::checkpoint_iterations(mem);
  for (std::size_t i = 0; i + 2 < copies.size(); ++i) {
    const fs::path folder{checkpoint_path(mem, copies[i])};
    if (!kept.count(normal(folder)))
      doomed.push_back(folder);
  }
  std::vector<std::string> removed;
  for (const auto& path : doomed) {
    std::error_code gone;
    fs::remove_all(path, gone);
    if (!gone)
      removed.push_back(path.lexically_normal().string());
  }
  return removed;
}

namespace detail {

// The n of a folder named iter-<digits>; -1 otherwise.
int iterations_of_folder(const std::string& name) {
  const std::string prefix = folder_prefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long long n = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
    if (n > 1'000'000'000) return -1;
  }
  return static_cast<int>(n);
}

std::string shard_file_name(const shard_file& f) {
  char name[160];
  std::snprintf(name, sizeof name, "shard-%s-w%d-of-%d-layers-%d-%d-tp%d-of-%d.ckpt",
                f.group.c_str(), f.writer, f.writers, f.first_layer, f.end_layer, f.tp_rank,
                f.tp_size);
  return name;
}

std::optional<shard_file> parse_shard_file_name(const std::string& name) {
  char group[17] = {};
  shard_file f;
  int consumed = 0;
  int got = std::sscanf(name.c_str(), "shard-%16[0-9a-f]-w%d-of-%d-layers-%d-%d-tp%d-of-%d.ckpt%n",
                        group, &f.writer, &f.writers, &f.first_layer, &f.end_layer, &f.tp_rank,
                        &f.tp_size, &consumed);
  if (got != 7 || consumed != static_cast<int>(name.size())) return std::nullopt;
  f.group = group;
  if (f.group.size() != 16 || f.writers < 1 || f.writer < 0 || f.writer >= f.writers ||
      f.first_layer < 0 || f.end_layer <= f.first_layer || f.tp_size < 1 || f.tp_rank < 0 ||
      f.tp_rank >= f.tp_size)
    return std::nullopt;
  // The canonical spelling only (no leading zeros or '+' that sscanf would accept).
  if (shard_file_name(f) != name) return std::nullopt;
  return f;
}

std::string layout_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

folder_state inspect_folder(const std::string& folder) {
  folder_state out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  std::vector<shard_file> files;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    auto f = parse_shard_file_name(it->path().filename().string());
    if (!f || !it->is_regular_file(ec)) continue;
    f->path = it->path().string();
    files.push_back(std::move(*f));
  }
  auto state = complete_group(files);
  state.exists = true;
  return state;
}

folder_state complete_group(const std::vector<shard_file>& all) {
  folder_state out;
  out.exists = !all.empty();
  std::map<std::string, std::map<int, shard_file>> groups;
  for (const auto& f : all)
    groups[f.group].emplace(f.writer, f);  // a writer's first file only (the same bytes)
  for (auto& [group, files] : groups) {
    const int needed = files.begin()->second.writers;
    int found = 0;
    for (const auto& [w, f] : files)
      if (f.writers == needed) ++found;
    if (found == needed && static_cast<int>(files.size()) == needed) {
      if (out.complete.empty())  // the first complete group in name order
        for (auto& [w, f] : files) out.complete.push_back(f);
    }
    if (found > out.best_found || out.best_needed == 0) {
      out.best_found = found;
      out.best_needed = needed;
    }
  }
  return out;
}

std::vector<int> checkpoint_iterations(const std::string& dir) {
  std::vector<int> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int n = iterations_of_folder(it->path().filename().string());
    if (n >= 0 && it->is_directory(ec)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void prune_checkpoints(const std::string& dir, int keep) {
  if (keep < 1) keep = 1;
  auto all = checkpoint_iterations(dir);
  std::vector<int> complete;
  for (auto it = all.rbegin(); it != all.rend() && static_cast<int>(complete.size()) < keep; ++it)
    if (!inspect_folder(checkpoint_path(dir, *it)).complete.empty()) complete.push_back(*it);
  if (static_cast<int>(complete.size()) < keep) return;
  // Every writer has finished every checkpoint up to a complete one (each writes its
  // checkpoints in order), so nothing older than complete.back() is still being written.
  const int oldest_kept = complete.back();
  for (int n : all) {
    if (n >= oldest_kept) break;
    std::error_code ec;
    fs::remove_all(checkpoint_path(dir, n), ec);  // best effort (another writer may race us)
  }
}

void prune_writer_files(const std::string& dir, const shard_file& mine, int keep,
                        const std::function<bool(const std::string& folder)>& pinned) {
  if (keep < 1) keep = 1;
  const auto name = shard_file_name(mine);
  auto all = checkpoint_iterations(dir);
  int kept = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const fs::path folder = checkpoint_path(dir, *it);
    std::error_code ec;
    if (!fs::exists(folder / name, ec)) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (pinned && pinned(folder.lexically_normal().string())) continue;
    fs::remove(folder / name, ec);
    if (fs::is_empty(folder, ec)) fs::remove(folder, ec);  // the last writer's file went
  }
}

}  // namespace detail
}  // namespace sailor::train
