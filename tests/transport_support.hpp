#pragma once
// Shared by the transport tests: the backends under test and bounded waits.

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
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

/// A job's TLS files made once per test process with scripts/make-tls-certs.sh (a CA and the
/// certificates `server` and `client`), in a folder removed at exit. `other_ca` makes a second,
/// unrelated CA and certificate `stranger`.
struct tls_test_files {
  std::string dir;
  comm::transport_options::tls_files as(const std::string& name) const {
    return {dir + "/" + name + ".pem", dir + "/" + name + ".key", dir + "/ca.pem"};
  }
};

inline const tls_test_files& tls_files(bool other_ca = false) {
  struct made {
    tls_test_files files;
    bool owned = true;
    explicit made(const std::string& names) {
      // A peer process of a test uses its parent's files (same CA), told by the environment.
      const char* inherited = names == "server client" ? std::getenv("SAILOR_TEST_TLS_DIR") : nullptr;
      if (inherited) {
        files.dir = inherited;
        owned = false;
        return;
      }
      auto dir = std::filesystem::temp_directory_path() /
                 ("sailor-tls-" + std::to_string(::getpid()) + "-" + names.substr(0, names.find(' ')));
      files.dir = dir.string();
      std::string cmd = std::string(SAILOR_SOURCE_DIR) + "/scripts/make-tls-certs.sh " +
                        files.dir + " --days 2 " + names + " > /dev/null";
      if (std::system(cmd.c_str()) != 0) files.dir.clear();
      if (names == "server client" && !files.dir.empty())
        ::setenv("SAILOR_TEST_TLS_DIR", files.dir.c_str(), 1);
    }
    ~made() {
      std::error_code ec;
      if (owned && !files.dir.empty()) std::filesystem::remove_all(files.dir, ec);
    }
  };
  static made job("server client");
  if (!other_ca) return job.files;
  static made other("stranger");  // only where asked for: a peer process killed never removes it
  return other.files;
}

inline std::unique_ptr<comm::transport> make_tls(const comm::transport_options& common) {
  auto o = common;
  o.tls = tls_files().as(common.local_name == "server" ? "server" : "client");
  auto t = comm::make_tcp_transport(o);
  if (!t) return nullptr;
  return std::move(*t);
}

inline std::vector<backend> all_backends() {
  tls_files();  // made now, so that peer processes spawned later share the CA
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
      {"tcp+tls", make_tls},
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
