#pragma once
// The dashboard's HTTP workers: a task queue for cpp-httplib that a few slow or stalled
// browsers cannot monopolise.
//
// cpp-httplib hands each accepted connection to its task queue, and a worker holds that
// connection until the answer is written or a timeout ends it. Its own ThreadPool has a
// fixed number of threads and an unbounded queue: 8 stalled connections would hold every
// worker and every other page would wait behind them. This pool instead
//   - starts a thread whenever a connection waits and no thread is idle, up to `max_threads`
//     (then connections queue; threads are not given back, the bound is the cost);
//   - bounds the queue: past `queue_limit` waiting connections the accepting thread waits for
//     room, so new connections wait in the kernel's backlog instead of in memory;
//   - blocks SIGPIPE in its threads: cpp-httplib 0.11 (Debian's) sends without MSG_NOSIGNAL,
//     and a browser that closes its connection in the middle of an answer would otherwise end
//     the whole coordinator. The send then fails with EPIPE and only that connection ends.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace sailor::app {

class dashboard_pool : public httplib::TaskQueue {
public:
  dashboard_pool(std::size_t max_threads, std::size_t queue_limit);
  ~dashboard_pool() override;
  dashboard_pool(const dashboard_pool&) = delete;
  dashboard_pool& operator=(const dashboard_pool&) = delete;

  /// Runs `fn` on an idle thread, a new one, or (all `max_threads` busy) the next that frees;
  /// waits while `queue_limit` connections already wait.
  void enqueue(std::function<void()> fn) override;
  /// Runs what is queued, then joins every thread. Called once, by the listening thread.
  void shutdown() override;

private:
  void work();

  const std::size_t max_threads_;
  const std::size_t queue_limit_;
  std::mutex mu_;
  std::condition_variable has_job_;
  std::condition_variable has_room_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool shutdown_ = false;
};

/// Blocks SIGPIPE in the calling thread (and the threads it starts later).
void block_sigpipe_in_this_thread();

}  // namespace sailor::app
