#pragma once
// The completion state shared by a channel request and whoever completes it (a transport
// callback, the channel failing a peer). Completed once; waits are bounded.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "sailor/comm/collective.hpp"

namespace sailor::comm::channel_detail {

class request_state {
public:
  /// Completes with `outcome` (empty: success); later calls are ignored. True if this call
  /// completed it.
  bool complete(status outcome) {
    {
      std::lock_guard lock{mu_};
      if (done_) return false;
      done_ = true;
      outcome_ = std::move(outcome);
    }
    cv_.notify_all();
    return true;
  }
  bool done() const {
    std::lock_guard lock{mu_};
    return done_;
  }
  /// Waits until complete or `timeout`; nullopt when it timed out.
  std::optional<status> wait(std::chrono::milliseconds timeout) const {
    std::unique_lock lock{mu_};
    if (!cv_.wait_for(lock, timeout, [this] { return done_; })) return std::nullopt;
    return outcome_;
  }

private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  status outcome_;
};

/// A request over a request_state. `on_abandon` runs when the request is destroyed before it
/// completed (a receive withdraws itself); the destructor then waits, bounded by `linger`, for
/// transfers that may still touch the buffer.
class state_request final : public request {
public:
  state_request(std::shared_ptr<request_state> state, std::string what,
                std::chrono::milliseconds linger, std::function<bool()> on_abandon = {})
      : state_(std::move(state)), what_(std::move(what)), linger_(linger),
        on_abandon_(std::move(on_abandon)) {}
  ~state_request() override {
    if (state_->done()) return;
    // A receive not yet landing is withdrawn at once; otherwise the transport may still
    // write into (or read from) the buffer: wait for it, bounded.
    if (on_abandon_ && on_abandon_()) return;
    state_->wait(linger_);
  }
  status wait(std::chrono::milliseconds timeout) override {
    auto outcome = state_->wait(timeout);
    if (!outcome)
      return error::disconnected(what_ + ": no answer within " + std::to_string(timeout.count()) + " ms");
    return *outcome;
  }
  bool test() override { return state_->done(); }

private:
  std::shared_ptr<request_state> state_;
  std::string what_;
  std::chrono::milliseconds linger_;
  std::function<bool()> on_abandon_;
};

/// A request that is already complete.
inline std::unique_ptr<request> completed_request(status outcome) {
  auto state = std::make_shared<request_state>();
  state->complete(std::move(outcome));
  return std::make_unique<state_request>(state, "", std::chrono::milliseconds{0});
}

}  // namespace sailor::comm::channel_detail
