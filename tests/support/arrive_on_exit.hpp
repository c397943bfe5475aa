#pragma once
// For ranks run as threads of one process: no rank's executor (and communicators) may be
// destroyed before every rank is done, or a rank that finishes early breaks the others' Gloo
// connections.

#include <latch>

namespace sailor::testing {

/// Arrives at `latch` and waits for the other ranks when it goes out of scope: declared after
/// a rank's communicators and executor, it keeps them alive until every rank is done.
struct arrive_on_exit {
  std::latch& latch;
  ~arrive_on_exit() { latch.arrive_and_wait(); }
};

}  // namespace sailor::testing
