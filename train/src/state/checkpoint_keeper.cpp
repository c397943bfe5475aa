#include "sailor/train/checkpoint_keeper.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"
#include "sailor/train/checkpoint.hpp"
#include "sailor/train/checkpoint_files.hpp"
#include "sailor/train/shard_service.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

namespace {

struct plan_folder {
  std::string path;
  int newest_complete = 0;  // iterations of its newest complete checkpoint (0: none)
  int newest_any = 0;       // of its newest checkpoint folder, complete or not
};

std::vector<plan_folder> newest_first(const std::string& job_dir) {
  std::vector<plan_folder> found;
  for (const auto& path : detail::plan_folders(job_dir)) {
    const auto all = detail::checkpoint_iterations(path);
    found.push_back({path, latest_checkpoint(path), all.empty() ? 0 : all.back()});
  }
  std::sort(found.begin(), found.end(), [](const plan_folder& a, const plan_folder& b) {
    return a.newest_complete > b.newest_complete;
  });
  return found;
}

}  // namespace

void prune_kept_checkpoints(const std::string& job_dir, int keep) {
  const auto folders = newest_first(job_dir);  // by their newest complete checkpoint
  if (folders.empty() || folders.front().newest_complete == 0)
    return;  // nothing complete yet: nothing is older than it
  const int best = folders.front().newest_complete;
  std::vector<std::string> kept;
  for (const auto& f : folders)
    if (f.newest_complete > 0 ? kept.size() < 2 : f.newest_any > best)
      kept.push_back(f.path);  // the two newest complete, and any newer still arriving
  remove_plan_folders(job_dir, kept);
  for (const auto& k : kept)
    detail::prune_checkpoints(k, keep);
}

checkpoint_keeper::checkpoint_keeper(comm::transport& transport, checkpoint_keeper_options options)
    : transport_(transport), options_(std::move(options)) {}

result<std::unique_ptr<checkpoint_keeper>> checkpoint_keeper::start(
  comm::transport& transport, checkpoint_keeper_options options) {
  if (options.host.empty() || options.host == "0.0.0.0" || options.host == "::")
    return sailor::error::invalid_input("--listen", "the checkpoint keeper needs the address "
                                        "nodes reach it on, not '" + options.host + "'");
  if (auto err = files::make_private_folder(fs::path{options.state_dir} / "checkpoints"))
    return *err;
  std::unique_ptr<checkpoint_keeper> self{new checkpoint_keeper(transport, std::move(options))};
  auto server = shard_server::start(transport, self->options_.host, self->options_.state_dir);
  if (!server)
    return server.error();
  self->server_ = std::move(*server);
  auto* raw = self.get();
  self->worker_ = std::make_unique<request_worker<request>>(
    self->options_.max_pending, [raw](request& r) { return raw->fetch(r); },
    [raw](const request& r, std::size_t waiting) {
      log::get("train")->warn("[keeper] {} not kept: {} fetches wait", r.file, waiting);
      raw->forget(r.file);
    });
  log::get("train")->info("[keeper] keeps the job's checkpoints in {} and serves them on {}",
                          self->options_.state_dir, self->address());
  return self;
}

result<std::shared_ptr<checkpoint_keeper>> checkpoint_keeper::start(
  std::unique_ptr<comm::transport> transport, checkpoint_keeper_options options) {
  auto keeper = start(*transport, std::move(options));
  if (!keeper)
    return keeper.error();
  (*keeper)->owned_transport_ = std::move(transport);
  return std::shared_ptr<checkpoint_keeper>(std::move(*keeper));
}

checkpoint_keeper::~checkpoint_keeper() = default;  // the worker stops first

void checkpoint_keeper::on_kept(kept_fn fn) {
  std::lock_guard lock{mu_};
  on_kept_ = std::move(fn);
}

std::string checkpoint_keeper::address() const { return server_->address(); }

void checkpoint_keeper::keep(const std::string& file, const std::string& holder) {
  if (!shard_copy_path(file) || handover_path(file))
    return;
  {
    std::lock_guard lock{mu_};
    if (!known_.insert(file).second)
      return;
  }
  worker_->push({file, holder});  // not under mu_: a dropped request takes it (forget)
}

int checkpoint_keeper::kept() const { return worker_->done(); }

int checkpoint_keeper::failed() const { return worker_->failed(); }

void checkpoint_keeper::forget(const std::string& file) {
  std::lock_guard lock{mu_};
  known_.erase(file);  // a later report of it (a copy's holder) may try again
}

bool checkpoint_keeper::fetch(const request& r) {
  if (auto err = fetch_shards(transport_, options_.state_dir, {{r.file, r.holder}}, options_.timeout)) {
    forget(r.file);
    log::get("train")->warn("[keeper] could not keep {}: {}", r.file, err->message);
    return false;
  }
  fetched(r.file);
  return true;
}

void checkpoint_keeper::fetched(const std::string& file) {
  // checkpoints/<job>/<plan folder>/<iteration>/<shard>
  const auto job_dir = fs::path{options_.state_dir} / fs::path{file}.parent_path().parent_path().parent_path();
  prune_kept_checkpoints(job_dir.string(), options_.keep);
  kept_fn tell;
  {
    std::lock_guard lock{mu_};
    tell = on_kept_;
  }
  std::error_code ec;
  if (!fs::exists(fs::path{options_.state_dir} / file, ec))
    return;  // pruned at once: older than what is kept
  log::get("train")->debug("[keeper] kept {}", file);
  if (tell)
    tell(file, address());
}

}  // namespace sailor::train
