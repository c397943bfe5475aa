#include "sailor/actors/checkpoint_holdings.hpp"

#include <algorithm>
#include <filesystem>

#include "sailor/train/checkpoint.hpp"
#include "sailor/train/checkpoint_files.hpp"

namespace sailor::actors {

namespace fs = std::filesystem;


void checkpoint_holdings::add(const std::string& file, const std::string& holder) {
  const fs::path p{file};
  if (!train::detail::parse_shard_file_name(p.filename().string()) || holder.empty())
    return;
  const int n = train::detail::iterations_of_folder(p.parent_path().filename().string());
  if (n <= 0)
    return;
  key k{p.parent_path().parent_path().string(), n};
  if (bad_.count(k))
    return;
  held_[k][p.filename().string()].insert(holder);
}

void checkpoint_holdings::forget(const std::string& holder) {
  for (auto c = held_.begin(); c != held_.end();) {
    for (auto f = c->second.begin(); f != c->second.end();) {
      f->second.erase(holder);
      f = f->second.empty() ? c->second.erase(f) : std::next(f);
    }
    c = c->second.empty() ? held_.erase(c) : std::next(c);
  }
}

std::map<int, std::string> checkpoint_holdings::complete_files(const files_held& c) {
  // Files by writing layout (group): complete when every writer 0..writers-1 is held.
  std::map<std::string, std::map<int, std::string>> groups;
  std::map<std::string, int> needed;
  for (const auto& [name, holders] : c) {
    auto f = train::detail::parse_shard_file_name(name);
    groups[f->group][f->writer] = name;
    needed[f->group] = f->writers;
  }
  for (auto& [group, writers] : groups)
    if (static_cast<int>(writers.size()) == needed[group])
      return std::move(writers);
  return {};
}

namespace {

// A folder of state the ranks of an ended plan keep in memory (node_recovery.hpp).
bool memory_folder(const std::string& folder) {
  return fs::path{folder}.filename() == "mem";
}

}  // namespace

std::string state_source(int start_iteration, const std::string& restore_dir,
                         const std::vector<std::string>& restore_files) {
  if (start_iteration <= 0)
    return "none";
  if (!memory_folder(restore_dir))
    return "checkpoint";
  const bool other = std::any_of(restore_files.begin(), restore_files.end(), [&](const auto& f) {
    return f.rfind(restore_dir + "/", 0) != 0;
  });
  return other ? "mixed" : "replicas";
}

std::string state_source_words(const std::string& source) {
  if (source == "replicas")
    return "the survivors' memory";
  if (source == "mixed")
    return "the survivors' memory and the checkpoint";
  if (source == "checkpoint")
    return "the checkpoint";
  return "nothing";
}

held_checkpoint checkpoint_holdings::newest(const std::string& under, int below) const {
  // Of the iterations with complete state, the newest; there, the survivors' memory first (no
  // disk read, and it is where the newest state is), then memory for the layers it holds and
  // the plan's checkpoint of the same iteration for the others (mixed), then the checkpoint.
  for (auto c = held_.rbegin(); c != held_.rend();) {
    const int n = c->first.iterations;
    const files_held* memory = nullptr;
    std::string memory_folder_name;
    std::vector<std::pair<const std::string*, const files_held*>> disks;  // newest folder first
    for (; c != held_.rend() && c->first.iterations == n; ++c) {
      if ((!under.empty() && c->first.folder.rfind(under, 0) != 0) || (below > 0 && n >= below))
        continue;
      if (memory_folder(c->first.folder)) {
        memory = &c->second;
        memory_folder_name = c->first.folder;
      } else {
        disks.emplace_back(&c->first.folder, &c->second);
      }
    }
    if (memory)
      if (auto out = assemble(n, memory_folder_name, *memory, {}); out.iterations > 0)
        return out;
    if (memory)
      for (const auto& [folder, files] : disks)
        if (auto out = assemble(n, memory_folder_name, *memory, {*folder, files}); out.iterations > 0)
          return out;
    for (const auto& [folder, files] : disks)
      if (auto out = assemble(n, *folder, *files, {}); out.iterations > 0)
        return out;
  }
  return {};
}

held_checkpoint checkpoint_holdings::assemble(int iterations, const std::string& folder,
                                              const files_held& first,
                                              std::pair<std::string, const files_held*> rest) {
  // Each file name of one writing layout, from `first` where it holds it, else from `rest`.
  files_held both = first;
  if (rest.second)
    for (const auto& [name, holders] : *rest.second)
      both.emplace(name, holders);
  auto writers = complete_files(both);
  if (writers.empty() ||
      std::none_of(writers.begin(), writers.end(), [&](const auto& w) { return first.count(w.second) > 0; }))
    return {};
  held_checkpoint out;
  out.iterations = iterations;
  out.folder = folder;
  const auto iteration_folder = fs::path{train::checkpoint_path("", iterations)}.filename();
  for (const auto& [writer, name] : writers) {
    const bool own = first.count(name) > 0;
    if (!own)
      out.mixed = true;
    const auto dir = fs::path{own ? folder : rest.first} / iteration_folder;
    for (const auto& holder : (own ? first : *rest.second).at(name)) {
      out.files.push_back((dir / name).string());
      out.holders.push_back(holder);
    }
  }
  if (out.mixed)
    out.other_folder = rest.first;
  return out;
}

void checkpoint_holdings::prune_older_than(int iterations) {
  for (auto c = held_.begin(); c != held_.end();)
    c = c->first.iterations < iterations ? held_.erase(c) : std::next(c);
}

void checkpoint_holdings::keep_newest(int keep, int pinned) {
  int complete = 0;
  for (auto c = held_.rbegin(); c != held_.rend(); ++c) {
    if (complete_files(c->second).empty() || ++complete < keep)
      continue;
    const int oldest = c->first.iterations;
    prune_older_than(pinned > 0 ? std::min(oldest, pinned) : oldest);
    return;
  }
}

void checkpoint_holdings::retain_folders(const std::set<std::string>& folders) {
  for (auto c = held_.begin(); c != held_.end();)
    c = folders.count(c->first.folder) ? std::next(c) : held_.erase(c);
}

void checkpoint_holdings::mark_bad(const std::string& folder, int iterations) {
  key k{folder, iterations};
  held_.erase(k);
  bad_.insert(k);
}

std::size_t checkpoint_holdings::files() const {
  std::size_t n = 0;
  for (const auto& [k, files] : held_)
    n += files.size();
  return n;
}

}  // namespace sailor::actors
