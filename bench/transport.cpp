// Throughput and latency of the transports on loopback, 1 KiB .. 64 MiB:
//   ucx      the UCX backend (active messages; UCX picks eager or rendezvous; set
//            SAILOR_RNDV_THRESHOLD=bytes to force rendezvous from that size)
//   tcp      the TCP backend (same interface, poll() thread, writev from the caller's buffer)
//   tls      the TCP backend with TLS 1.3 (--tls-cert/--tls-key/--tls-ca; OpenSSL)
//   socket   a bare blocking TCP socket pair (no framing beyond an 8-byte length), the floor
// Latency is half a ping-pong round trip of one message; throughput is a stream of messages
// with 4 in flight. Both ends live in this process (two transports, two progress threads).
// UCX reads UCX_TLS / UCX_NET_DEVICES from the environment (NET_DEVICES defaults to lo here).
// Then the CAF message round trip in one actor system and across processes through the bridge
// (the measurement of bench/actor_roundtrip, shared: actor_roundtrip.hpp).
//
//   build/bench/transport [--quick] [--transfers-only]
//
// TLS (--quick, Nov 24 2026, load 1.5): 0.51-0.74 GB/s from 64 KiB to 16 MiB against the plain
// TCP backend's 1.96-3.57 (tls/tcp 0.18-0.26; 0.50 at 64 MiB), 1.6-2.5x the latency up to 16
// KiB: encrypting and decrypting every byte with both ends on the same two cores. Enough for
// links between zones (0.1-1.25 GB/s); inside a zone, collectives stay on Gloo's pairs.
//
// Measured on the shared 2-core machine (load 5-6 from other builds), Nov 2026: UCX moves
// 1-16 KiB about as fast as the TCP backend but only 0.3-0.6x its throughput from 64 KiB to
// 16 MiB (full run: 256 KiB 1.27 vs 3.83 GB/s, 1 MiB 1.56 vs 2.75, 16 MiB 1.03 vs 2.28).
// Why: with UCX_LOG_LEVEL=info UCX reports its lanes as `am(tcp/lo)` only: no shared memory
// and no zero-copy (cma) lane, because the endpoints ask for peer error handling
// (UCP_ERR_HANDLING_MODE_PEER, needed to report a dead peer), which UCX 1.13's sysv/posix/cma
// transports do not offer by default. So every payload goes through UCX's active-message
// protocol over TCP sockets (8 KiB send segments, bounce buffers and reassembly: copies on
// both sides) where our TCP backend writes from and reads into the user's buffers.
// Tried, all with `--quick`, ucx/tcp throughput ratio from 64 KiB to 16 MiB (noisy):
//   default                                                                0.22-0.74
//   UCX_TLS=tcp,self                                                       0.33-0.95
//   UCX_{POSIX,SYSV}_ERROR_HANDLING=y (lanes: am(sysv tcp), keepalive sysv)  0.26-1.47
//   endpoints without error handling (lanes: am(sysv cma); experiment only) 0.32-0.95
//   UCX_TCP_TX_SEG_SIZE=64K UCX_TCP_RX_SEG_SIZE=256K                        0.28-0.89
//   UCX_RNDV_THRESH=32K                                                    0.24-0.71
//   a busy-polling progress thread instead of epoll wake-ups               0.01-0.99 (worse)
// None closes the gap on this oversubscribed machine (every transfer is several hand-offs
// between the two progress threads and the benchmark's threads on 2 busy cores). Not fixed;
// to be measured again on an idle machine, where shared memory with error handling
// (UCX_{POSIX,SYSV}_ERROR_HANDLING=y) is the first thing to try.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actor_roundtrip.hpp"
#include "sailor/comm/link_probe.hpp"
#include "sailor/comm/shaping.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/comm/ucx.hpp"

using namespace sailor::comm;
using clk = std::chrono::steady_clock;

namespace {

struct figures {
  double latency_us = 0;
  double gbytes_per_s = 0;
};

double seconds(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int iterations_for(std::size_t size, bool quick) {
  double budget = quick ? 64e6 : 512e6;  // bytes moved per measurement
  int n = static_cast<int>(budget / static_cast<double>(size));
  return std::max(quick ? 3 : 8, std::min(n, quick ? 200 : 2000));
}

// ---- transports through the interface

class pair_bench {
public:
  explicit pair_bench(std::function<std::unique_ptr<transport>(const transport_options&)> make) {
    transport_options so;
    so.local_name = "bench-server";
    transport_options co;
    co.local_name = "bench-client";
    server_ = make(so);
    client_ = make(co);
    // The server echoes every tensor back (ping-pong) or counts it (stream).
    auto l = server_->listen(address{"127.0.0.1", 0}, [this](const connection_ptr& c) {
      server_conn_ = c;
      connection_handlers h;
      h.on_tensor = [this](tensor_descriptor d, payload_buffer p) {
        if (echo_) {
          auto keep = std::make_shared<payload_buffer>(std::move(p));
          server_conn_->send_tensor(d, keep->bytes(), [keep](const op_status&) {});
        } else {
          arrived(p.size());
        }
      };
      return h;
    });
    if (!l) {
      std::fprintf(stderr, "listen: %s\n", l.error().to_string().c_str());
      std::exit(1);
    }
    listener_ = std::move(*l);
    connection_handlers h;
    h.on_tensor = [this](tensor_descriptor, payload_buffer p) { arrived(p.size()); };
    h.on_open = [this] { arrived(0); };
    auto c = client_->connect(listener_->local_address(), h);
    if (!c) std::exit(1);
    conn_ = *c;
    wait_for(1);
  }

  figures run(std::size_t size, bool quick) {
    std::vector<std::byte> payload(size, std::byte{7});
    figures f;
    int n = iterations_for(size, quick);
    // Latency: ping-pong.
    echo_ = true;
    auto one = [&] {
      reset();
      conn_->send_tensor({dtype::u8, {static_cast<std::int64_t>(size)}, 0, "", 0}, payload, nullptr);
      wait_for(1);
    };
    for (int i = 0; i < 3; ++i) one();
    int pings = std::max(3, n / 4);
    auto t0 = clk::now();
    for (int i = 0; i < pings; ++i) one();
    f.latency_us = seconds(t0, clk::now()) / pings / 2 * 1e6;
    // Throughput: a stream with 4 in flight.
    echo_ = false;
    reset();
    std::mutex m;
    std::condition_variable cv;
    int in_flight = 0;
    t0 = clk::now();
    for (int i = 0; i < n; ++i) {
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return in_flight < 4; });
        ++in_flight;
      }
      conn_->send_tensor({dtype::u8, {static_cast<std::int64_t>(size)}, 0, "", 0}, payload,
                         [&](const op_status&) {
                           {
                             std::lock_guard lock(m);
                             --in_flight;
                           }
                           cv.notify_all();
                         });
    }
    wait_for(n);
    f.gbytes_per_s = static_cast<double>(size) * n / seconds(t0, clk::now()) / 1e9;
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return in_flight == 0; });
    return f;
  }

private:
  void arrived(std::size_t) {
    {
      std::lock_guard lock(mutex_);
      ++count_;
    }
    cv_.notify_all();
  }
  void reset() {
    std::lock_guard lock(mutex_);
    count_ = 0;
  }
  void wait_for(int n) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return count_ >= n; })) {
      std::fprintf(stderr, "timed out waiting for %d messages (got %d)\n", n, count_);
      std::exit(1);
    }
  }

  std::unique_ptr<transport> server_;
  std::unique_ptr<transport> client_;
  std::unique_ptr<listener> listener_;
  connection_ptr conn_;
  connection_ptr server_conn_;
  std::atomic<bool> echo_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
};

// ---- bare sockets

bool read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n) {
    auto r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* p, std::size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n) {
    auto w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

figures socket_run(std::size_t size, bool quick) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  ::listen(lfd, 1);
  socklen_t len = sizeof(sa);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
  int n = iterations_for(size, quick);
  int pings = std::max(3, n / 4) + 3;
  std::thread server([lfd, size, n, pings] {
    int fd = ::accept(lfd, nullptr, nullptr);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> buf(size);
    std::uint64_t len = 0;
    for (int i = 0; i < pings; ++i) {  // echo
      if (!read_all(fd, &len, 8) || !read_all(fd, buf.data(), len)) break;
      write_all(fd, &len, 8);
      write_all(fd, buf.data(), len);
    }
    for (int i = 0; i < n; ++i)  // sink
      if (!read_all(fd, &len, 8) || !read_all(fd, buf.data(), len)) break;
    char ack = 1;
    write_all(fd, &ack, 1);
    ::close(fd);
  });
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> buf(size, 7);
  std::uint64_t l64 = size;
  figures f;
  auto ping = [&] {
    write_all(fd, &l64, 8);
    write_all(fd, buf.data(), size);
    read_all(fd, &l64, 8);
    read_all(fd, buf.data(), size);
  };
  for (int i = 0; i < 3; ++i) ping();
  auto t0 = clk::now();
  for (int i = 0; i < pings - 3; ++i) ping();
  f.latency_us = seconds(t0, clk::now()) / (pings - 3) / 2 * 1e6;
  t0 = clk::now();
  for (int i = 0; i < n; ++i) {
    write_all(fd, &l64, 8);
    write_all(fd, buf.data(), size);
  }
  char ack;
  read_all(fd, &ack, 1);
  f.gbytes_per_s = static_cast<double>(size) * n / seconds(t0, clk::now()) / 1e9;
  server.join();
  ::close(fd);
  ::close(lfd);
  return f;
}

std::string human(std::size_t size) {
  if (size >= (1u << 20)) return std::to_string(size >> 20) + " MiB";
  return std::to_string(size >> 10) + " KiB";
}

// The link probe (comm/link_probe.hpp) of links emulated by the shaper over TCP on loopback:
// what it reads against what the link was set to, and how long it took.
void print_link_probes() {
  std::printf("link probe of emulated links (TCP on loopback through the link shaper)\n");
  std::printf("%10s %10s | %12s %8s | %s\n", "set ms", "set MB/s", "measured ms", "probe s",
              "measured MB/s by size");
  for (auto [latency_ms, mb_per_s] : {std::pair{20.0, 50.0}, std::pair{2.0, 100.0},
                                      std::pair{50.0, 25.0}}) {
    sailor::config::cluster cl;
    cl.regions = {{"r1", {"zone-a"}}, {"r2", {"zone-b"}}};
    cl.zones = {{"zone-a", "r1", {}}, {"zone-b", "r2", {}}};
    sailor::config::zone_link link;
    link.from = "zone-a";
    link.to = "zone-b";
    link.latency_s = latency_ms / 1e3;
    link.bandwidth_gbytes_per_s = mb_per_s / 1e3;
    cl.links = {link};
    auto make = [&](const char* name, const char* zone) {
      transport_options o;
      o.local_name = name;
      o.local_zone = zone;
      return make_shaped_transport(make_tcp_transport(o).value(), links_of(cl));
    };
    auto responder = make("responder", "zone-a");
    auto prober = make("prober", "zone-b");
    auto l = responder->listen(address{"127.0.0.1", 0}, probe_responder()).value();
    auto r = probe_link(*prober, l->local_address());
    if (!r) {
      std::printf("%10.1f %10.1f | failed: %s\n", latency_ms, mb_per_s, r.error().message.c_str());
      continue;
    }
    std::printf("%10.1f %10.1f | %12.2f %8.3f |", latency_ms, mb_per_s, r->latency_s * 1e3,
                r->elapsed_s);
    for (const auto& [bytes, rate] : r->bandwidth)
      std::printf(" %s: %.1f", human(static_cast<std::size_t>(bytes)).c_str(), rate / 1e6);
    std::printf("\n");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  bool round_trips = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") quick = true;
    else if (arg == "--transfers-only") round_trips = false;
    else if (arg == "--probes-only") {
      print_link_probes();
      return 0;
    }
    else {
      std::fprintf(stderr, "usage: transport [--quick] [--transfers-only] [--probes-only]\n");
      return 2;
    }
  }
  // The echo servers of the round trips are forked first, while this process has no threads.
  std::unique_ptr<sailor::bench::echo_servers> echo_servers;
  if (round_trips) echo_servers = sailor::bench::start_echo_servers();
  ucx_options uo;
  if (!std::getenv("UCX_NET_DEVICES")) uo.ucx_config["NET_DEVICES"] = "lo";
  if (const char* t = std::getenv("SAILOR_RNDV_THRESHOLD")) uo.rndv_threshold_bytes = std::strtoull(t, nullptr, 10);
  const char* tls = std::getenv("UCX_TLS");
  pair_bench ucx([&](const transport_options& o) {
    auto u = uo;
    u.common = o;
    auto t = make_ucx_transport(u);
    if (!t) {
      std::fprintf(stderr, "ucx: %s\n", t.error().to_string().c_str());
      std::exit(1);
    }
    return std::move(*t);
  });
  pair_bench tcp([](const transport_options& o) { return make_tcp_transport(o).value(); });
  // The TCP backend with TLS (both ends one certificate of a CA made for this run).
  auto tls_dir = std::filesystem::temp_directory_path() /
                 ("sailor-bench-tls-" + std::to_string(::getpid()));
  const std::string make_certs = std::string(SAILOR_SOURCE_DIR) + "/scripts/make-tls-certs.sh " +
                                 tls_dir.string() + " --days 1 bench > /dev/null";
  if (std::system(make_certs.c_str()) != 0) {
    std::fprintf(stderr, "transport: scripts/make-tls-certs.sh failed (is openssl installed?)\n");
    return 1;
  }
  pair_bench tcp_tls([&](const transport_options& o) {
    auto with_tls = o;
    with_tls.tls = {(tls_dir / "bench.pem").string(), (tls_dir / "bench.key").string(),
                    (tls_dir / "ca.pem").string()};
    return make_tcp_transport(with_tls).value();
  });

  std::printf("transport benchmark on loopback (UCX_TLS=%s), one process, %s\n",
              tls ? tls : "(default)", quick ? "quick" : "full");
  std::printf("%8s | %10s %10s %10s %10s %8s | %9s %9s %9s %9s %8s %8s\n", "size", "ucx us",
              "tcp us", "tls us", "socket us", "tcp/ucx", "ucx GB/s", "tcp GB/s", "tls GB/s",
              "sock GB/s", "ucx/tcp", "tls/tcp");
  for (std::size_t size = 1024; size <= (64u << 20); size *= 4) {
    auto u = ucx.run(size, quick);
    auto t = tcp.run(size, quick);
    auto e = tcp_tls.run(size, quick);
    auto s = socket_run(size, quick);
    std::printf("%8s | %10.1f %10.1f %10.1f %10.1f %8.2f | %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f\n",
                human(size).c_str(), u.latency_us, t.latency_us, e.latency_us, s.latency_us,
                t.latency_us / u.latency_us, u.gbytes_per_s, t.gbytes_per_s, e.gbytes_per_s,
                s.gbytes_per_s, u.gbytes_per_s / t.gbytes_per_s, e.gbytes_per_s / t.gbytes_per_s);
    std::fflush(stdout);
  }
  std::printf("\n");
  print_link_probes();
  std::error_code ec;
  std::filesystem::remove_all(tls_dir, ec);
  if (echo_servers) {
    std::printf("\n");
    sailor::bench::print_actor_round_trips(*echo_servers, quick ? 500 : 2000);
  }
  return 0;
}
