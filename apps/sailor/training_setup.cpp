#include "training_setup.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "sailor/actors/train/checkpoint.hpp"

namespace sailor::app {

namespace fs = std::filesystem;

resume_point find_resume_point(const std::string& root) {
  resume_point best;
  std::error_code ec;
  for (fs::directory_iterator i{root, ec}, end; !ec && i != end; i.increment(ec)) {
    if (!i->is_directory(ec))
      continue;
    const auto name = i->path().filename().string();
    if (name.size() < 2 || name[0] != 'v')
      continue;
    const int n = train::latest_checkpoint(i->path().string());
    if (n > best.iterations)
      best = {n, i->path().string()};
  }
  return best;
}

bool fill_training_job(actors::training_job& tj, const training_settings& s) {
  const fs::path work{s.work_dir};
  tj.model = s.model;
  tj.store_dir = (work / "store").string();
  tj.iterations = s.iterations;
  tj.seed = static_cast<std::uint64_t>(s.job.seed);
  tj.optimizer = s.job.optimizer == config::optimizer_kind::sgd ? "sgd" : "adamw";
  tj.torch_threads = s.torch_threads;
  tj.timeout_ms = s.timeout_ms;
  tj.links = s.links;
  if (s.checkpoint_every > 0) {
    const auto root = work / "checkpoints";
    auto from = find_resume_point(root.string());
    tj.start_iteration = std::min(from.iterations, s.iterations);
    tj.restore_dir = from.dir;
    tj.checkpoint_dir = (root / ("v" + std::to_string(tj.plan_version))).string();
    tj.checkpoint_every = s.checkpoint_every;
  }
  return tj.start_iteration < tj.iterations;
}

}  // namespace sailor::app
