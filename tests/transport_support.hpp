#pragma once
// Shared by the transport tests: the backends under test and bounded waits.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sailor/comm/shaping.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/comm/ucx.hpp"

namespace sailor::test {

/// A flag plus condition variable; every wait is bounded.
class event_box {
public:
  /// Notifies under the lock: a waiter may destroy the box as soon as it sees the change.
  template <class F>
  void update(F&& f) {
    std::lock_guard lock(mutex_);
    f();
    cv_.notify_all();
  }
  /// Waits until `pred()` (checked under the lock) or the timeout; returns pred().
  template <class P>
  bool wait_for(P&& pred, double seconds) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), pred);
  }
  std::mutex& mutex() { return mutex_; }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

struct backend {
  std::string name;
  std::function<std::unique_ptr<comm::transport>(const comm::transport_options&)> make;
};

inline comm::ucx_options ucx_test_options(const comm::transport_options& common) {
  comm::ucx_options o;
  o.common = common;
  o.ucx_config["NET_DEVICES"] = "lo";
  o.ucx_config["TLS"] = "tcp,sm,self";
  return o;
}

inline std::unique_ptr<comm::transport> make_ucx(const comm::transport_options& common) {
  auto t = comm::make_ucx_transport(ucx_test_options(common));
  if (!t) return nullptr;
  return std::move(*t);
}

inline std::unique_ptr<comm::transport> make_tcp(const comm::transport_options& common) {
  auto t = comm::make_tcp_transport(common);
  if (!t) return nullptr;
  return std::move(*t);
}

/// A link fast enough not to slow the conformance tests, but still through the shaper.
inline config::zone_link fast_link() {
  config::zone_link l;
  l.latency_s = 200e-6;
  l.bandwidth_gbytes_per_s = 20.0;
  return l;
}

inline std::vector<backend> all_backends() {
  return {
      {"ucx", make_ucx},
      {"ucx(rndv from 64 KiB)",
       [](const comm::transport_options& o) -> std::unique_ptr<comm::transport> {
         auto u = ucx_test_options(o);
         u.rndv_threshold_bytes = 64 * 1024;
         auto t = comm::make_ucx_transport(u);
         if (!t) return nullptr;
         return std::move(*t);
       }},
      {"tcp", make_tcp},
      {"shaped(ucx)",
       [](const comm::transport_options& o) -> std::unique_ptr<comm::transport> {
         auto inner = make_ucx(o);
         if (!inner) return nullptr;
         return comm::make_shaped_transport(
             std::move(inner), [](const std::string&, const std::string&) { return fast_link(); });
       }},
  };
}

/// Bytes of a payload of `size` in test number `seed`: every byte checked on arrival.
inline std::byte pattern_byte(std::size_t i, std::uint64_t seed) {
  return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 12)) % 251);
}

}  // namespace sailor::test
