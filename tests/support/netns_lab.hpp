#pragma once
// Hosts that share nothing but the network, on one machine: network namespaces joined by veth
// pairs to a bridge that lives in a namespace of its own (nothing is added to the machine's
// own network), and a private /tmp per process (a mount namespace). Addresses are chosen in
// 10.231.0.0/16, inside these namespaces only. Everything is removed when the lab goes.
//
// Needs root (CI and the developers' machines run as root); `available()` says whether the
// namespaces could be made, and why not.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "run_command.hpp"

namespace sailor::testing {

class netns_lab {
public:
  /// `hosts` namespaces host0..host<hosts-1>, at 10.231.<subnet>.1 .. .<hosts>.
  explicit netns_lab(int hosts) {
    const int id = static_cast<int>(::getpid() % 200) + 20;
    prefix_ = "sl" + std::to_string(id);
    subnet_ = "10.231." + std::to_string(id) + ".";
    // Namespaces of an earlier run that was killed (same pid) would make ours fail.
    for (int k = 0; k < hosts; ++k)
      run_command("ip netns del " + ns(k) + " 2>/dev/null", 20);
    run_command("ip netns del " + sw() + " 2>/dev/null", 20);
    if (!sh("ip netns add " + sw())) {
      why_ = "cannot create a network namespace (needs root): " + last_err_;
      return;
    }
    made_.push_back(sw());
    ok_ = sh("ip -n " + sw() + " link add br0 type bridge") &&
          sh("ip -n " + sw() + " link set br0 up");
    for (int k = 0; ok_ && k < hosts; ++k)
      ok_ = add_host(k);
    if (!ok_)
      why_ = "cannot set up the namespaces: " + last_err_;
  }
  ~netns_lab() {
    for (auto i = made_.rbegin(); i != made_.rend(); ++i)
      sh("ip netns del " + *i);
  }
  netns_lab(const netns_lab&) = delete;
  netns_lab& operator=(const netns_lab&) = delete;

  bool available() const { return ok_; }
  const std::string& why_not() const { return why_; }

  std::string ns(int host) const { return prefix_ + "h" + std::to_string(host); }
  std::string address(int host) const { return subnet_ + std::to_string(host + 1); }

  /// The argv that runs `argv` in host `host`'s network namespace, in a mount namespace of its
  /// own whose /tmp is an empty tmpfs, with `env` (NAME=VALUE) set and UCX_NET_DEVICES unset.
  /// A checkout or build under /tmp stays visible there: each such folder is opened before the
  /// tmpfs covers it and bound back at its path from that descriptor.
  std::vector<std::string> in_host(int host, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env = {}) const {
    std::string opens, binds;
    int fd = 7;
    for (const auto& dir : hidden_by_private_tmp(kept_)) {
      const auto n = std::to_string(fd++);
      opens += "exec " + n + "<'" + dir + "' && ";
      binds += " && mkdir -p '" + dir + "' && mount -c --bind /proc/self/fd/" + n + " '" + dir +
               "' && exec " + n + "<&-";
    }
    std::string script = opens + "mount -t tmpfs sailor-tmp /tmp" + binds + " && exec";
    for (auto& a : argv)
      script += " '" + a + "'";
    // UCX_NET_DEVICES is dropped: the test harness limits UCX to loopback, which is not what
    // a host of the lab has (its processes pick the interface of their own address).
    std::vector<std::string> out{"/usr/sbin/ip", "netns", "exec", ns(host), "/usr/bin/env",
                                 "-u", "UCX_NET_DEVICES"};
    out.insert(out.end(), env.begin(), env.end());
    out.insert(out.end(), {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                           script});
    return out;
  }

  /// `dir` (a folder under /tmp) stays visible in the hosts' private /tmp, as the build does.
  void keep_visible(const std::string& dir) { kept_.push_back(dir); }

  /// Host `host` drops off the network without a word, as a machine that loses power: its
  /// link goes down on the switch's side, so no peer gets a reset, only silence. True when done.
  bool cut(int host) {
    return sh("ip -n " + sw() + " link set " + prefix_ + "p" + std::to_string(host) + " down");
  }

private:
  std::string sw() const { return prefix_ + "sw"; }

  // The folders under /tmp (their first level) holding the programs, the sources or the data
  // the lab's processes use, or `kept`: a private /tmp would hide them.
  static std::vector<std::string> hidden_by_private_tmp(std::vector<std::string> paths) {
    std::vector<std::string> out;
    paths.insert(paths.end(), {SAILOR_BIN_DIR, SAILOR_SOURCE_DIR, SAILOR_DATA_DIR});
    for (const auto& path : paths) {
      std::error_code ec;
      const auto full = std::filesystem::weakly_canonical(path, ec).string();
      if (ec || full.rfind("/tmp/", 0) != 0) continue;
      const auto top = full.substr(0, full.find('/', 5));
      if (std::find(out.begin(), out.end(), top) == out.end()) out.push_back(top);
    }
    return out;
  }

  bool add_host(int k) {
    const std::string host = ns(k), outer = prefix_ + "p" + std::to_string(k);
    if (!sh("ip netns add " + host))
      return false;
    made_.push_back(host);
    return sh("ip link add " + outer + " netns " + sw() + " type veth peer name sl0 netns " +
              host) &&
           sh("ip -n " + sw() + " link set " + outer + " master br0") &&
           sh("ip -n " + sw() + " link set " + outer + " up") &&
           sh("ip -n " + host + " addr add " + address(k) + "/24 dev sl0") &&
           sh("ip -n " + host + " link set sl0 up") && sh("ip -n " + host + " link set lo up");
  }

  bool sh(const std::string& command) {
    auto r = run_command(command, 20);
    if (r.exit_code != 0)
      last_err_ = command + ": " + r.err;
    return r.exit_code == 0;
  }

  std::string prefix_, subnet_, why_, last_err_;
  std::vector<std::string> made_;
  std::vector<std::string> kept_;
  bool ok_ = false;
};

/// Ends a test program that needs the lab where it cannot be made (not root): exit code 77,
/// which CTest reports as skipped (SKIP_RETURN_CODE), never as passed.
inline void skip_without_namespaces(const netns_lab& lab) {
  if (lab.available())
    return;
  std::fprintf(stderr, "skipped: %s\n", lab.why_not().c_str());
  std::exit(77);
}

}  // namespace sailor::testing
