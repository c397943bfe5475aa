#pragma once
// Ending actors from outside: what the handles that own them (coordinator, node,
// remote_scheduler) do when they are destroyed.

#include <chrono>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

namespace sailor::actors::detail {

/// Asks `a` to stop (exit reason user_shutdown); nothing when there is no actor.
template <class Handle>
void stop_actor(const Handle& a) {
  if (a)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

/// Waits at most `limit` for `a` to be down; false when it is still up then.
template <class Handle>
bool wait_down(const Handle& a, std::chrono::milliseconds limit) {
  caf::scoped_actor waiter{a->home_system()};
  waiter->monitor(a);
  bool down = false;
  waiter->receive([&down](const caf::down_msg&) { down = true; }, caf::after(limit) >> [] {});
  return down;
}

}  // namespace sailor::actors::detail
