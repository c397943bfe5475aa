// The release watch of a node's training ranks (node_training/release_watch.hpp): how long a
// released rank may finish its iteration, and that the watch gives up the rank's work only
// when the rank does not stop by itself within that grace.
#include "node_training/release_watch.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <future>

using namespace std::chrono_literals;
using sailor::train::abort_on_release;
using sailor::train::iteration_grace;
using sailor::train::release_signal;

TEST_CASE("release watch: the grace is 1.5 iterations, at least 200 ms and at most 2 s") {
  iteration_grace g;
  CHECK(g.get() == 200ms);  // before any iteration
  g.measured(0.05);         // the tiny model on a CPU
  CHECK(g.get() == 200ms);
  g.measured(0.8);  // an iteration longer than the floor finishes after a release
  CHECK(g.get() == 1200ms);
  g.measured(30);  // long iterations: a silent peer must not hold the state wait
  CHECK(g.get() == 2000ms);
  g.measured(0.3);  // the newest iteration counts
  CHECK(g.get() == 450ms);
}

TEST_CASE("release watch: a rank that stops within the grace is not aborted, one that does not is") {
  release_signal signal;
  std::promise<void> aborted;
  auto fired = aborted.get_future();
  {
    // A generous grace: the rank (this thread) stops right after the release.
    abort_on_release watch{signal, [] { return 60s; }, [&aborted] { aborted.set_value(); }};
    signal.release();
  }  // the watch ends: the rank stopped by itself
  CHECK(fired.wait_for(0s) == std::future_status::timeout);

  release_signal blocked;
  std::promise<void> gave_up;
  auto gave_up_fired = gave_up.get_future();
  {
    // No grace: the rank blocked in a collective is aborted at the release.
    abort_on_release watch{blocked, [] { return 0ms; }, [&gave_up] { gave_up.set_value(); }};
    blocked.release();
    CHECK(gave_up_fired.wait_for(30s) == std::future_status::ready);
  }
}

TEST_CASE("release watch: nothing is aborted when the rank ends without a release") {
  release_signal signal;
  bool aborted = false;
  { abort_on_release watch{signal, [] { return 0ms; }, [&aborted] { aborted = true; }}; }
  CHECK_FALSE(aborted);
  CHECK_FALSE(signal.released.load());
}
