#include "checkpoint_copies.hpp"

#include "sailor/config/log.hpp"
#include "sailor/train/shard_service.hpp"

namespace sailor::train {

checkpoint_copier::checkpoint_copier(comm::transport& transport, std::string state_dir,
                                     std::string node)
    : transport_(transport), state_dir_(std::move(state_dir)), node_(std::move(node)),
      thread_([this] { loop(); }) {}

checkpoint_copier::~checkpoint_copier() {
  {
    std::lock_guard lock{mu_};
    stopping_ = true;
    pending_.clear();
  }
  wake_.notify_all();
  thread_.join();  // a copy in flight ends within its timeout
}

void checkpoint_copier::copy(const std::string& path, const std::string& target,
                             std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock{mu_};
    if (stopping_)
      return;
    if (pending_.size() >= max_pending) {
      log::get("train")->warn("[{}] checkpoint copy of {} dropped: {} copies wait", node_,
                              pending_.front().path, pending_.size());
      pending_.pop_front();
    }
    pending_.push_back({path, target, timeout});
  }
  wake_.notify_one();
}

int checkpoint_copier::copied() const {
  std::lock_guard lock{mu_};
  return copied_;
}

int checkpoint_copier::failed() const {
  std::lock_guard lock{mu_};
  return failed_;
}

void checkpoint_copier::loop() {
  while (true) {
    request next;
    {
      std::unique_lock lock{mu_};
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (stopping_)
        return;
      next = std::move(pending_.front());
      pending_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    auto bytes = read_shard_file(state_dir_, next.path);
    status outcome = bytes ? hand_over_shard(transport_, next.target, next.path, *bytes, next.timeout)
                           : status{bytes.error()};
    std::lock_guard lock{mu_};
    if (outcome) {
      ++failed_;
      log::get("train")->warn("[{}] could not copy checkpoint shard {} to {}: {}", node_,
                              next.path, next.target, outcome->message);
      continue;
    }
    ++copied_;
    log::get("train")->info("[{}] copied checkpoint shard {} ({} bytes) to {} in {:.3f} s", node_,
                            next.path, (*bytes)->size(), next.target,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
}

}  // namespace sailor::train
