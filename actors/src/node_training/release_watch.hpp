#pragma once
// How a rank's thread learns that its plan was released, and gives up what it waits for.
// Private to the node trainer (node_training.cpp).

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace sailor::train {

// Tells a rank's thread to stop when its stage actor goes (its plan was released: a new
// plan, or a node lost). Set from the actor's thread, which must not block, or by stop().
struct release_signal {
  std::atomic<bool> released{false};
  std::mutex mu;
  std::condition_variable cv;
  void release() {
    {
      std::lock_guard lock{mu};
      released = true;
    }
    cv.notify_all();
  }
};

// How long a released training rank may go on with its iteration in flight before it is
// aborted: 200 ms, or 1.5 times the rank's last completed iteration where that is longer (in a
// re-plan with every peer alive, growth, drift or a node leaving with notice, the iteration
// then ends by itself and counts, however long iterations are), at most 2 s (a rank blocked
// on a silent peer still reports its state well within the supervisor's state wait, 5 s by
// default).
class iteration_grace {
public:
  static constexpr std::chrono::milliseconds floor{200};
  static constexpr std::chrono::milliseconds ceiling{2000};

  /// A completed iteration took `seconds`.
  void measured(double seconds) {
    const double ms = 1.5 * seconds * 1000;
    ms_ = ms >= static_cast<double>(ceiling.count()) ? ceiling.count()
          : ms <= static_cast<double>(floor.count()) ? floor.count()
                                                      : std::llround(ms);
  }
  std::chrono::milliseconds get() const { return std::chrono::milliseconds{ms_.load()}; }

private:
  std::atomic<std::int64_t> ms_{floor.count()};
};

// While a rank trains (or restores), a thread of its own waits for the release and then
// gives up what the rank waits for: `on_release` aborts the rank's communicators and
// channel (or cancels its state fetches). The iteration in flight then ends within a short
// bound even when a peer went silent (no connection reset), so the rank keeps its state and
// reports it within the supervisor's state wait, instead of blocking until the peer timeout.
// A training rank first gets a grace (iteration_grace, read at the release) to finish that
// iteration: in a re-plan with every peer alive it usually does, and the iteration counts
// (an abort during the plan's last all-reduce could leave some ranks after the iteration and
// others before it); a rank blocked on a silent peer is aborted once the grace is over.
class abort_on_release {
public:
  /// `grace` is asked once the release came.
  abort_on_release(release_signal& signal, std::function<std::chrono::milliseconds()> grace,
                   std::function<void()> on_release)
      : signal_(signal) {
    watcher_ = std::thread([this, grace = std::move(grace), on_release = std::move(on_release)] {
      std::unique_lock lock{signal_.mu};
      signal_.cv.wait(lock, [this] { return signal_.released.load() || finished_; });
      if (signal_.cv.wait_for(lock, grace(), [this] { return finished_; }))
        return;
      lock.unlock();
      on_release();
    });
  }
  ~abort_on_release() {
    {
      std::lock_guard lock{signal_.mu};
      finished_ = true;
    }
    signal_.cv.notify_all();
    watcher_.join();
  }
  abort_on_release(const abort_on_release&) = delete;
  abort_on_release& operator=(const abort_on_release&) = delete;

private:
  release_signal& signal_;
  bool finished_ = false;  // guarded by signal_.mu
  std::thread watcher_;
};

}  // namespace sailor::train
