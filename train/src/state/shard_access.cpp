#include "sailor/train/shard_access.hpp"

#include <algorithm>
#include <filesystem>

#include "sailor/train/checkpoint_files.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

namespace {

// The parts of checkpoints/<job>/<folder>/<iteration folder>/<shard>, or nullopt.
struct shard_path {
  std::string job_dir, folder;
  int iteration = -1;
  detail::shard_file file;
};

std::optional<shard_path> parse_path(const std::string& path) {
  const fs::path p{path};
  std::vector<std::string> parts;
  for (const auto& part : p)
    parts.push_back(part.string());
  if (parts.size() != 5 || parts[0] != "checkpoints")
    return std::nullopt;
  auto file = detail::parse_shard_file_name(parts[4]);
  if (!file)
    return std::nullopt;
  return shard_path{parts[0] + "/" + parts[1], parts[2], detail::iterations_of_folder(parts[3]),
                    *file};
}

const std::vector<std::pair<int, int>>* layers_of(const plan_members& p, const std::string& node) {
  for (const auto& [name, layers] : p.nodes)
    if (name == node)
      return &layers;
  return nullptr;
}

std::string plan_name(const plan_members& p) { return "plan v" + std::to_string(p.version); }

std::string layers_text(int first, int end) {
  return "layers " + std::to_string(first) + "-" + std::to_string(end);
}

}  // namespace

shard_access::shard_access(std::int64_t max_held_bytes) : max_held_(max_held_bytes) {}

void shard_access::set_services(std::set<std::string> names) {
  std::lock_guard lock{mu_};
  services_ = std::move(names);
}

void shard_access::set_self(std::string name) {
  std::lock_guard lock{mu_};
  self_ = std::move(name);
}

void shard_access::plan(plan_members p) {
  std::lock_guard lock{mu_};
  if (current_ && p.version == current_->members.version)
    return;
  previous_ = std::move(current_);
  const int start = p.start_iteration;
  current_ = known_plan{std::move(p), start};
}

void shard_access::completed(std::int64_t version, int iterations) {
  std::lock_guard lock{mu_};
  for (auto* p : {&current_, &previous_})
    if (*p && (*p)->members.version == version)
      (*p)->reached = std::max((*p)->reached, iterations);
}

std::vector<const shard_access::known_plan*> shard_access::plans() const {
  std::vector<const known_plan*> out;
  if (current_)
    out.push_back(&*current_);
  if (previous_)
    out.push_back(&*previous_);
  return out;
}

std::int64_t shard_access::budget_per_peer() const {
  std::lock_guard lock{mu_};
  std::set<std::string> peers;
  for (const auto* p : plans())
    for (const auto& [name, layers] : p->members.nodes)
      if (name != self_)
        peers.insert(name);
  return max_held_ / std::max<std::int64_t>(1, static_cast<std::int64_t>(peers.size()));
}

std::string shard_access::may_fetch(const std::string& peer, const std::string& path) const {
  std::lock_guard lock{mu_};
  if (services_.count(peer))
    return {};
  const auto known = plans();
  if (known.empty())
    return "this node was told of no plan yet: '" + peer + "' may fetch nothing";
  auto shard = parse_path(path);
  if (!shard)
    return "'" + path + "' is not a shard of an iteration folder";
  const auto& f = shard->file;
  bool member = false;
  for (const auto* p : known) {
    const auto* layers = layers_of(p->members, peer);
    if (!layers)
      continue;
    member = true;
    for (const auto& [first, end] : *layers)
      if (first < f.end_layer && f.first_layer < end)
        return {};
  }
  std::string plans_told = plan_name(known.front()->members);
  if (known.size() > 1)
    plans_told += " or " + plan_name(known.back()->members);
  if (!member)
    return "'" + peer + "' is not a node of " + plans_told;
  return "'" + peer + "' holds no " + layers_text(f.first_layer, f.end_layer) + " in " +
         plans_told + ": its role does not need " + path;
}

std::string shard_access::hand_over_in(const known_plan& p, const std::string& peer,
                                       const std::string& path) const {
  const auto& m = p.members;
  const auto* layers = layers_of(m, peer);
  if (!layers)
    return "'" + peer + "' is not a node of " + plan_name(m);
  auto shard = parse_path(path);
  if (!shard)
    return "'" + path + "' is not a shard of an iteration folder";
  const fs::path dir{m.checkpoint_dir};
  if (m.checkpoint_dir.empty() || shard->job_dir != dir.parent_path().string() ||
      (shard->folder != "mem" && shard->folder != dir.filename().string()))
    return path + " is not in a folder of " + plan_name(m) + " (" +
           (m.checkpoint_dir.empty() ? std::string{"none"} : m.checkpoint_dir) + ")";
  const int last = std::min(m.end_iteration, p.reached + 1);
  if (shard->iteration < m.start_iteration || shard->iteration > last)
    return "iteration " + std::to_string(shard->iteration) + " of " + path + " is not one " +
           plan_name(m) + " reached (" + std::to_string(m.start_iteration) + " to " +
           std::to_string(last) + ")";
  const auto& f = shard->file;
  const bool own = std::any_of(layers->begin(), layers->end(), [&f](const auto& l) {
    return l.first <= f.first_layer && f.end_layer <= l.second;
  });
  if (!own)
    return "'" + peer + "' holds no " + layers_text(f.first_layer, f.end_layer) + " in " +
           plan_name(m);
  return {};
}

std::string shard_access::may_hand_over(const std::string& peer, const std::string& path) const {
  std::lock_guard lock{mu_};
  const auto known = plans();
  if (known.empty())
    return "this node was told of no plan yet: it takes no hand-over";
  std::string why;
  for (const auto* p : known) {
    auto refused = hand_over_in(*p, peer, path);
    if (refused.empty())
      return {};
    // The reason from the plan the peer is a node of, if any: the more telling one.
    const auto stranger = [](const std::string& w) {
      return w.find("is not a node of") != std::string::npos;
    };
    if (why.empty() || (stranger(why) && !stranger(refused)))
      why = std::move(refused);
  }
  return why;
}

}  // namespace sailor::train
