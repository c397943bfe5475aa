#include "checkpoint_copies.hpp"

#include "sailor/config/log.hpp"
#include "sailor/train/shard_service.hpp"

namespace sailor::train {

checkpoint_copier::checkpoint_copier(comm::transport& transport, std::string state_dir,
                                     std::string node)
    : transport_(transport), state_dir_(std::move(state_dir)), node_(std::move(node)),
      worker_(max_pending, [this](request& r) { return copy_now(r); },
              [this](const request& r, std::size_t waiting) {
                log::get("train")->warn("[{}] checkpoint copy of {} dropped: {} copies wait",
                                        node_, r.path, waiting);
              }) {}

void checkpoint_copier::copy(const std::string& path, const std::string& target,
                             std::chrono::milliseconds timeout) {
  worker_.push({path, target, timeout});
}

bool checkpoint_copier::copy_now(const request& r) {
  const auto start = std::chrono::steady_clock::now();
  auto bytes = read_shard_file(state_dir_, r.path);
  status outcome = bytes ? hand_over_shard(transport_, r.target, r.path, *bytes, r.timeout)
                         : status{bytes.error()};
  if (outcome) {
    log::get("train")->warn("[{}] could not copy checkpoint shard {} to {}: {}", node_, r.path,
                            r.target, outcome->message);
    return false;
  }
  log::get("train")->info("[{}] copied checkpoint shard {} ({} bytes) to {} in {:.3f} s", node_,
                          r.path, (*bytes)->size(), r.target,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                            .count());
  return true;
}

}  // namespace sailor::train
