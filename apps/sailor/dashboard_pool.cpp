#include "dashboard_pool.hpp"

#include <signal.h>

#include <algorithm>
#include <utility>

namespace sailor::app {

void block_sigpipe_in_this_thread() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

dashboard_pool::dashboard_pool(std::size_t max_threads, std::size_t queue_limit)
    : max_threads_(std::max<std::size_t>(1, max_threads)),
      queue_limit_(std::max<std::size_t>(1, queue_limit)) {}

dashboard_pool::~dashboard_pool() { shutdown(); }

void dashboard_pool::enqueue(std::function<void()> fn) {
  std::unique_lock lock{mu_};
  has_room_.wait(lock, [this] { return jobs_.size() < queue_limit_ || shutdown_; });
  if (shutdown_)
    return;  // not reached from cpp-httplib: it shuts the queue down after its last enqueue
  jobs_.push_back(std::move(fn));
  if (jobs_.size() > idle_ && threads_.size() < max_threads_)
    threads_.emplace_back([this] { work(); });
  has_job_.notify_one();
}

void dashboard_pool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock{mu_};
    shutdown_ = true;
    threads.swap(threads_);
  }
  has_job_.notify_all();
  has_room_.notify_all();
  for (auto& t : threads)
    t.join();
}

void dashboard_pool::work() {
  block_sigpipe_in_this_thread();
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock{mu_};
      ++idle_;
      has_job_.wait(lock, [this] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty())
        return;  // shut down and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    has_room_.notify_one();
    job();  // serves one connection and closes it; every step of it is bounded by a timeout
  }
}

}  // namespace sailor::app
