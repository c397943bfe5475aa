#pragma once
/// One thread that works through requests in the order they come, off the caller's thread: a
/// node's checkpoint copies to another stage (checkpoint_copies.hpp), the coordinator's
/// checkpoint keeper (checkpoint_keeper.hpp). At most `max_pending` wait; beyond, the oldest
/// is dropped (a newer checkpoint makes it moot) and `dropped` is told. Destroying it drops
/// what waits and joins the thread: the request in flight ends within its own bound.
/// No LibTorch here.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace sailor::train {

template <class Request>
class request_worker {
public:
  /// Runs `request` (on the worker's thread); true when it was done, false when it failed.
  using work_fn = std::function<bool(Request& request)>;
  using dropped_fn = std::function<void(const Request& request, std::size_t waiting)>;

  request_worker(std::size_t max_pending, work_fn work, dropped_fn dropped = {})
      : max_pending_(max_pending), work_(std::move(work)), dropped_(std::move(dropped)),
        thread_([this] { loop(); }) {}
  ~request_worker() {
    {
      std::lock_guard lock{mu_};
      stopping_ = true;
      pending_.clear();
    }
    wake_.notify_all();
    thread_.join();
  }
  request_worker(const request_worker&) = delete;
  request_worker& operator=(const request_worker&) = delete;

  /// Queues `request`; returns at once.
  void push(Request request) {
    {
      std::lock_guard lock{mu_};
      if (stopping_)
        return;
      if (pending_.size() >= max_pending_) {
        if (dropped_)
          dropped_(pending_.front(), pending_.size());
        pending_.pop_front();
      }
      pending_.push_back(std::move(request));
    }
    wake_.notify_one();
  }

  /// Requests done and failed so far (tests, logs).
  int done() const {
    std::lock_guard lock{mu_};
    return done_;
  }
  int failed() const {
    std::lock_guard lock{mu_};
    return failed_;
  }

private:
  void loop() {
    while (true) {
      Request next;
      {
        std::unique_lock lock{mu_};
        wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
        if (stopping_)
          return;
        next = std::move(pending_.front());
        pending_.pop_front();
      }
      const bool ok = work_(next);
      std::lock_guard lock{mu_};
      ++(ok ? done_ : failed_);
    }
  }

  const std::size_t max_pending_;
  const work_fn work_;
  const dropped_fn dropped_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Request> pending_;
  bool stopping_ = false;
  int done_ = 0, failed_ = 0;
  std::thread thread_;  // last: starts once the rest is in place
};

}  // namespace sailor::train
