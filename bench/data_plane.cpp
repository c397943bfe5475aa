// The training data plane, measured: what the runtime's tensors travel over.
//
// Part 1, point to point (activations and gradients between pipeline stages): one rank sends
// a stream of tensors to another (4 in flight), 64 KiB .. 64 MiB, over
//   tcp         a transport channel on comm's TCP transport (what `--data-transport tcp` uses)
//   ucx         a transport channel on comm's UCX transport (`--data-transport ucx`)
//   gloo pairs  Gloo's own TCP pairs (what the runtime used before the channel)
// first on loopback, then (as root, with `ip`) across two network namespaces joined by a veth
// pair: each rank's thread enters its own namespace, so its sockets live there and every
// byte crosses the veth pair as it would between two hosts. UCX finds its devices in /sys,
// which a thread's namespace switch does not change, so its two ranks run as two processes of
// this program (`ip netns exec`, --peer-rank), meeting through a folder.
//
// Across namespaces on the quiet 2-core machine (4 runs, Nov 24 2026, load 0.7-1.5), GB/s at
// 1 / 4 / 16 / 64 MiB: tcp 2.75-4.94 / 1.90-2.90 / 2.44-3.15 / 1.77-3.42, ucx 1.31-3.74 /
// 1.21-3.35 / 1.09-3.16 / 1.05-1.60, gloo pairs 1.91-2.70 / 2.46-3.40 / 2.32-3.25 / 1.70-3.12;
// tcp/gloo 1.08-2.59x at 1 MiB, 0.66-1.49x at 4-16 MiB, 0.57-2.00x at 64 MiB (noisy).
//
// Part 2, data-parallel all-reduce across emulated zones (the link shaper between zones, a
// 20 ms / 200 MB/s link): the hierarchical all-reduce (zone reduce-scatter or all-reduce,
// shards' ring across zones, zone all-gather) against one flat ring over all members on the
// same shaped links, for 1, 2 and 3 zones, with the time the cross-zone bytes need on the link
// (the floor) and the simulator's price of the same group (sim_context::allreduce_s, links
// inside a zone at the rate part 1 measured). Ranks are threads of this process (2 cores:
// compute-bound phases are slowed by the other threads; the cross-zone phase is link-bound).
//
//   build/bench/data_plane [--quick] [--no-netns] [--skip-allreduce]
//
// Figures printed as ratios within one run (the machine is shared).

#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sailor/comm/channel.hpp"
#include "sailor/comm/hierarchical.hpp"
#include "sailor/comm/shaping.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/comm/ucx.hpp"
#include "sailor/config/load.hpp"
#include "sailor/simulator/simulator.hpp"

using namespace sailor;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// ---- network namespaces (two "hosts" joined by a veth pair) ----

constexpr const char* ns_names[2] = {"sailor-bench-a", "sailor-bench-b"};
constexpr const char* ns_addresses[2] = {"10.213.7.1", "10.213.7.2"};

bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

void remove_namespaces() {
  for (const char* n : ns_names) sh(std::string("ip netns del ") + n);
}

bool make_namespaces() {
  remove_namespaces();
  const std::string a = ns_names[0], b = ns_names[1];
  bool ok = sh("ip netns add " + a) && sh("ip netns add " + b) &&
            sh("ip link add sbv0 netns " + a + " type veth peer name sbv1 netns " + b);
  for (int i = 0; ok && i < 2; ++i) {
    const std::string exec = std::string("ip netns exec ") + ns_names[i] + " ";
    const std::string dev = i == 0 ? "sbv0" : "sbv1";
    ok = sh(exec + "ip addr add " + ns_addresses[i] + "/24 dev " + dev) &&
         sh(exec + "ip link set " + dev + " up") && sh(exec + "ip link set lo up");
  }
  if (!ok) {
    remove_namespaces();
    return false;
  }
  // UCX lists a device only once its link is up (operstate), which a fresh veth reaches a
  // moment later: wait for it, bounded.
  for (int i = 0; i < 2; ++i) {
    const std::string check = std::string("ip netns exec ") + ns_names[i] +
                              " grep -qx up /sys/class/net/" + (i == 0 ? "sbv0" : "sbv1") +
                              "/operstate";
    for (int tries = 0; tries < 100 && !sh(check); ++tries)
      std::this_thread::sleep_for(50ms);  // sleep override: polls a link coming up, bounded (5 s)
  }
  return true;
}

// Moves the calling thread (and the threads it starts from now on: transports' progress
// threads, Gloo's device loop) into namespace `i`.
std::optional<std::string> enter_namespace(int i) {
  const std::string path = std::string("/var/run/netns/") + ns_names[i];
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path;
  int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) return "setns " + path + " failed";
  return std::nullopt;
}

// ---- part 1: point to point ----

enum class p2p_kind { tcp, ucx, gloo_pairs };

struct p2p_backend {
  std::string name;
  p2p_kind kind;
};

std::vector<p2p_backend> p2p_backends() {
  return {{"tcp", p2p_kind::tcp}, {"ucx", p2p_kind::ucx}, {"gloo pairs", p2p_kind::gloo_pairs}};
}

// The transport of a rank listening on `host`; UCX picks the interface holding it, as
// sailor-node does.
comm::transport_maker maker_of(p2p_kind kind, const std::string& host) {
  if (kind == p2p_kind::tcp) return comm::make_tcp_transport;
  return [host](const comm::transport_options& o) -> result<std::unique_ptr<comm::transport>> {
    comm::ucx_options u;
    u.common = o;
    u.host = host;
    return comm::make_ucx_transport(u);
  };
}

// One rank's side of the stream: rank 0 sends `rounds` tensors of `bytes` to rank 1, 4 in
// flight; returns the seconds rank 1 took from its first receive posted to its last done.
struct p2p_run {
  std::vector<double> seconds;  // per size, measured on the receiver
  std::string error;
};

std::unique_ptr<comm::channel> open_channel(const p2p_backend& b, int rank, const std::string& host,
                                            std::shared_ptr<comm::rendezvous_store> store,
                                            std::shared_ptr<void> gloo_store,
                                            std::unique_ptr<comm::communicator>& world,
                                            std::string& error) {
  if (b.kind == p2p_kind::gloo_pairs) {
    comm::gloo_options g;
    g.in_process_store = std::move(gloo_store);
    g.hostname = host;
    g.timeout = 30s;
    auto f = comm::make_gloo_factory(rank, g);
    if (!f) return error = f.error().to_string(), nullptr;
    auto w = (*f)->create("world", {0, 1});
    if (!w) return error = w.error().to_string(), nullptr;
    world = std::move(*w);
    return comm::make_communicator_channel(*world);
  }
  comm::transport_channel_options o;
  o.make_transport = maker_of(b.kind, host);
  o.store = std::move(store);
  o.host = host;
  o.timeout = 30s;
  o.prefix = "bench";
  auto ch = comm::make_transport_channel_factory(rank, o)->create("p2p", {1 - rank});
  if (!ch) return error = ch.error().to_string(), nullptr;
  return std::move(*ch);
}

void stream(comm::channel& ch, int rank, std::size_t bytes, int rounds, std::vector<char>& buf,
            std::uint64_t tag_base, std::string& error) {
  constexpr int in_flight = 4;
  std::vector<std::unique_ptr<comm::request>> pending;
  for (int i = 0; i < rounds && error.empty(); ++i) {
    comm::buffer_view v{buf.data() + (i % in_flight) * bytes, bytes, comm::element_type::u8};
    pending.push_back(rank == 0 ? ch.isend(v, 1, tag_base + i) : ch.irecv(v, 0, tag_base + i));
    if (static_cast<int>(pending.size()) == in_flight || i + 1 == rounds) {
      for (auto& r : pending)
        if (auto st = r->wait(ch.timeout()); st && error.empty()) error = st->to_string();
      pending.clear();
    }
  }
}

p2p_run run_p2p(const p2p_backend& b, const std::vector<std::size_t>& sizes, int rounds, bool netns) {
  auto store = comm::make_memory_store();
  auto gloo_store = comm::make_in_process_store();
  p2p_run out;
  out.seconds.assign(sizes.size(), 0);
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      std::string host = "127.0.0.1";
      if (netns) {
        if (auto e = enter_namespace(rank)) return void(errors[rank] = *e);
        host = ns_addresses[rank];
      }
      std::unique_ptr<comm::communicator> world;
      auto ch = open_channel(b, rank, host, store, gloo_store, world, errors[rank]);
      if (!ch) return;
      std::vector<char> buf(4 * sizes.back(), static_cast<char>(rank));
      for (std::size_t s = 0; s < sizes.size() && errors[rank].empty(); ++s) {
        const int n = std::max(2, static_cast<int>(rounds * (sizes.front() / double(sizes[s]))));
        auto start = clock_type::now();
        stream(*ch, rank, sizes[s], std::max(n, 8), buf, s << 32, errors[rank]);
        if (rank == 1) out.seconds[s] = seconds_since(start) / std::max(n, 8);
      }
      // The sender's channel flushes on destruction; the receiver got everything already.
    });
  for (auto& t : threads) t.join();
  out.error = !errors[0].empty() ? errors[0] : errors[1];
  return out;
}

// UCX across namespaces needs one process per namespace (`ip netns exec` gives each its own
// /sys): the two ranks run as this program with --peer-rank, meeting through a folder.
class file_store final : public comm::rendezvous_store {
public:
  explicit file_store(std::string dir) : dir_(std::move(dir)) {}
  status set(const std::string& key, const std::vector<char>& value) override {
    const auto path = dir_ + "/" + encode(key);
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out.write(value.data(), static_cast<std::streamsize>(value.size()));
      if (!out) return error::failed("cannot write " + path);
    }
    std::filesystem::rename(path + ".tmp", path);
    return {};
  }
  result<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto path = dir_ + "/" + encode(key);
    const auto until = clock_type::now() + timeout;
    while (clock_type::now() < until) {
      std::ifstream in(path, std::ios::binary);
      if (in) return std::vector<char>(std::istreambuf_iterator<char>(in), {});
      std::this_thread::sleep_for(5ms);  // sleep override: a bench's polling store, bounded by the timeout
    }
    return error::failed("no key " + key + " in " + dir_ + " (timed out)");
  }

private:
  static std::string encode(std::string key) {
    for (auto& c : key)
      if (c == '/') c = '_';
    return key;
  }
  std::string dir_;
};

// One rank of the UCX stream, in this process (started in namespace `rank` by the parent).
int run_peer_rank(int rank, const std::string& store_dir, const std::vector<std::size_t>& sizes,
                  int rounds) {
  p2p_backend b{"ucx", p2p_kind::ucx};
  std::unique_ptr<comm::communicator> world;
  std::string error;
  auto ch = open_channel(b, rank, ns_addresses[rank], std::make_shared<file_store>(store_dir),
                         nullptr, world, error);
  if (!ch) return std::fprintf(stderr, "rank %d: %s\n", rank, error.c_str()), 1;
  std::vector<char> buf(4 * sizes.back(), static_cast<char>(rank));
  for (std::size_t s = 0; s < sizes.size() && error.empty(); ++s) {
    const int n = std::max(2, static_cast<int>(rounds * (sizes.front() / double(sizes[s]))));
    auto start = clock_type::now();
    stream(*ch, rank, sizes[s], std::max(n, 8), buf, s << 32, error);
    if (rank == 1) std::printf("%zu %.9f\n", s, seconds_since(start) / std::max(n, 8));
  }
  if (!error.empty()) return std::fprintf(stderr, "rank %d: %s\n", rank, error.c_str()), 1;
  return 0;
}

// Runs both ranks as processes in the two namespaces; the receiver's seconds per size.
p2p_run run_ucx_processes(const std::vector<std::size_t>& sizes, int rounds, bool quick) {
  p2p_run out;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sailor-bench-store-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return out.error = "no /proc/self/exe", out;
  auto command = [&](int rank) {
    return std::string("timeout 300 ip netns exec ") + ns_names[rank] + " " + self +
           " --peer-rank " + std::to_string(rank) + " --store-dir " + dir.string() +
           " --rounds " + std::to_string(rounds) + (quick ? " --quick" : "");
  };
  std::thread sender([&] { sh(command(0)); });
  out.seconds.assign(sizes.size(), 0);
  if (FILE* f = ::popen((command(1) + " 2>&1").c_str(), "r")) {
    char line[512];
    std::size_t got = 0;
    while (std::fgets(line, sizeof(line), f)) {
      std::size_t s = 0;
      double sec = 0;
      if (std::sscanf(line, "%zu %lf", &s, &sec) == 2 && s < sizes.size()) {
        out.seconds[s] = sec;
        ++got;
      } else {
        out.error += line;
      }
    }
    if (::pclose(f) != 0 || got != sizes.size())
      if (out.error.empty()) out.error = "the receiving process failed";
  }
  sender.join();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

// Returns Gloo pairs' GB/s at the largest size up to 4 MiB (0 when it failed).
double print_p2p(const std::vector<std::size_t>& sizes, int rounds, bool netns, bool quick) {
  std::printf("\n== point to point, %s: GB/s per size (receiver's view, 4 in flight)\n",
              netns ? "across two network namespaces (veth)" : "loopback");
  std::printf("%-12s", "backend");
  for (auto s : sizes) std::printf(" %9zuK", s / 1024);
  std::printf("\n");
  std::vector<std::vector<double>> rates;
  for (const auto& b : p2p_backends()) {
    // UCX lists the interfaces it may use from /sys, which belongs to the process's mount
    // namespace: a thread that entered another network namespace still sees the first one's
    // devices. Across namespaces its two ranks are therefore two processes.
    auto r = netns && b.kind == p2p_kind::ucx ? run_ucx_processes(sizes, rounds, quick)
                                              : run_p2p(b, sizes, rounds, netns);
    std::printf("%-12s", b.name.c_str());
    if (!r.error.empty()) {
      std::printf(" failed: %s\n", r.error.c_str());
      rates.emplace_back();
      continue;
    }
    rates.emplace_back();
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      rates.back().push_back(sizes[s] / r.seconds[s] / 1e9);
      std::printf(" %10.2f", rates.back().back());
    }
    std::printf("\n");
  }
  if (rates.size() == 3 && !rates[0].empty() && !rates[2].empty()) {
    std::printf("%-12s", "tcp/gloo");
    for (std::size_t s = 0; s < sizes.size(); ++s) std::printf(" %9.2fx", rates[0][s] / rates[2][s]);
    std::printf("\n");
  }
  double gloo = 0;
  for (std::size_t s = 0; s < sizes.size() && rates.size() == 3 && !rates[2].empty(); ++s)
    if (sizes[s] <= (4u << 20)) gloo = rates[2][s];
  return gloo;
}

// ---- part 2: all-reduce across emulated zones ----

struct allreduce_case {
  std::vector<std::string> zones;  // per member
  bool hierarchical = true;
};

// Every member all-reduces `count` floats `reps` times; the slowest member's mean seconds.
std::optional<double> run_allreduce(const allreduce_case& c, std::size_t count, int reps,
                                    const config::zone_link& link, std::string& error) {
  const int n = static_cast<int>(c.zones.size());
  comm::zone_layout layout;
  for (int r = 0; r < n; ++r) layout.members.push_back(r);
  // A flat ring: every member its own "zone" of the layout (the links stay the real ones).
  for (int r = 0; r < n; ++r) layout.zones.push_back(c.hierarchical ? c.zones[r] : "m" + std::to_string(100 + r));
  comm::gloo_options g;
  g.in_process_store = comm::make_in_process_store();
  g.timeout = 60s;
  auto store = comm::make_memory_store();
  std::vector<double> seconds(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto factory = comm::make_gloo_factory(r, g);
      if (!factory) return void(errors[r] = factory.error().to_string());
      std::unique_ptr<comm::communicator> zone_group;
      for (const auto& z : layout.zone_names()) {
        auto members = layout.members_of(z);
        if (z != layout.zones[r] || members.size() < 2) continue;
        auto made = (*factory)->create("zone-" + z, members);
        if (!made) return void(errors[r] = made.error().to_string());
        zone_group = std::move(*made);
      }
      comm::transport_channel_options o;
      o.store = store;
      o.timeout = 60s;
      o.prefix = "bench";
      o.transport.local_zone = c.zones[r];
      o.make_transport = [link](const comm::transport_options& t) -> result<std::unique_ptr<comm::transport>> {
        auto inner = comm::make_tcp_transport(t);
        if (!inner) return inner.error();
        return comm::make_shaped_transport(std::move(*inner), [link](const std::string& a, const std::string& b) {
          return a == b ? config::zone_link{} : link;
        });
      };
      auto ch = comm::make_transport_channel_factory(r, o)->create("p2p", comm::hierarchical_peers(layout, r));
      if (!ch) return void(errors[r] = ch.error().to_string());
      auto comm_ = comm::make_hierarchical("dp", layout, r, std::move(zone_group), **ch, 1);
      std::vector<float> data(count, 1.0f);
      (void)comm_->barrier();
      auto start = clock_type::now();
      for (int i = 0; i < reps && errors[r].empty(); ++i)
        if (auto st = comm_->all_reduce({data.data(), data.size(), comm::element_type::f32}))
          errors[r] = st->to_string();
      seconds[r] = seconds_since(start) / reps;
      if (errors[r].empty() && data[0] != static_cast<float>(std::pow(n, reps)))
        errors[r] = "wrong sum " + std::to_string(data[0]);
      (void)comm_->barrier();
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (!e.empty()) return error = e, std::nullopt;
  return *std::max_element(seconds.begin(), seconds.end());
}

// Seconds the cross-zone bytes of each scheme need on the link, sent by the busiest member.
double link_floor(const allreduce_case& c, std::size_t bytes, const config::zone_link& link) {
  comm::zone_layout layout;
  layout.zones = c.zones;
  for (std::size_t r = 0; r < c.zones.size(); ++r) layout.members.push_back(static_cast<int>(r));
  const double zones = static_cast<double>(layout.zone_names().size());
  const double per_s = link.bandwidth_gbytes_per_s * 1e9;
  if (zones < 2) return 0;  // nothing crosses a zone link
  if (c.hierarchical) {
    const double shard = bytes / double(layout.min_zone_size());
    return 2 * (zones - 1) * (link.latency_s + shard / zones / per_s);
  }
  // A flat ring of n members in zone order a,b,a,b..: every step some member sends
  // bytes/n across a zone boundary.
  const double n = static_cast<double>(c.zones.size());
  return 2 * (n - 1) * (link.latency_s + bytes / n / per_s);
}

// The simulator's price of the same all-reduce: a cluster of the layout's zones joined by
// `link`, CPU "devices" whose links inside a zone run at `local_gbytes_per_s` (what part 1
// measured for Gloo pairs on loopback), the tiny model's shape (only the group matters here).
std::optional<double> predicted_allreduce(const std::vector<std::string>& zones, std::size_t count,
                                          const config::zone_link& link, double local_gbytes_per_s,
                                          bool hierarchical, std::string& error) {
  std::set<std::string> names(zones.begin(), zones.end());
  std::string yaml = "name: bench-zones\npricing: on_demand\ngpus:\n  - {name: CPU, peak_fp16_tflops: 0.05, "
                     "peak_fp32_tflops: 0.05, memory_gib: 2, gpus_per_node: 1, intra_node_gbytes_per_s: " +
                     std::to_string(local_gbytes_per_s) + ", inter_node_gbytes_per_s: " +
                     std::to_string(local_gbytes_per_s) +
                     ", on_demand_usd_per_hour: 0.05, spot_usd_per_hour: 0.02}\nzones:\n";
  for (const auto& z : names) yaml += "  - {name: " + z + ", region: local, gpus: {CPU: 8}}\n";
  yaml += "links:\n";
  for (const auto& a : names)
    for (const auto& b : names)
      if (a < b)
        yaml += "  - {from: " + a + ", to: " + b + ", latency_ms: " + std::to_string(link.latency_s * 1e3) +
                ", bandwidth_gbytes_per_s: " + std::to_string(link.bandwidth_gbytes_per_s) +
                ", egress_usd_per_gb: 0.01}\n";
  const auto path = std::filesystem::temp_directory_path() / ("data_plane-" + std::to_string(::getpid()) + ".yaml");
  { std::ofstream(path) << yaml; }
  auto cluster = config::load_cluster(path.string());
  std::filesystem::remove(path);
  auto model = config::load_model(std::string(SAILOR_SOURCE_DIR) + "/configs/models/tiny.yaml");
  if (!cluster || !model) return error = "cannot load the bench's cluster or the tiny model", std::nullopt;
  simulator::sim_inputs in;
  in.model = *model;
  in.cluster = &*cluster;
  simulator::sim_options o;
  o.hierarchical_allreduce = hierarchical;
  o.grad_bytes_per_param = 4;
  auto ctx = simulator::sim_context::make(in, o);
  if (!ctx) return error = ctx.error().to_string(), std::nullopt;
  std::vector<simulator::endpoint> eps;
  for (const auto& z : zones) eps.push_back({ctx->zone_id(z), ctx->gpu_id("CPU"), 1});
  const double t = ctx->allreduce_s(eps.data(), static_cast<int>(eps.size()), static_cast<double>(count));
  if (t < 0) return error = "the simulator found no link", std::nullopt;
  return t;
}

void print_allreduce(bool quick, double local_gbytes_per_s) {
  config::zone_link link;
  link.latency_s = 0.020;
  link.bandwidth_gbytes_per_s = 0.2;
  const std::size_t count = quick ? (1u << 20) : (4u << 20);  // floats: 4 or 16 MB
  const int reps = quick ? 2 : 3;
  std::printf("\n== data-parallel all-reduce of %zu MB across emulated zones (20 ms, 200 MB/s links)\n",
              count * 4 / 1000000);
  std::printf("(simulator: links inside a zone at %.2f GB/s, Gloo pairs on loopback as measured above)\n",
              local_gbytes_per_s);
  std::printf("%-22s %-13s %10s %10s %10s %10s\n", "layout", "scheme", "measured", "link floor", "simulator",
              "sim/meas");
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts{
      {"1 zone x 4 ranks", {"a", "a", "a", "a"}},
      {"2 zones x 2 ranks", {"a", "b", "a", "b"}},
      {"3 zones x 2 ranks", {"a", "b", "c", "a", "b", "c"}},
      {"2 zones, 1 + 3 ranks", {"a", "b", "b", "b"}}};
  for (const auto& [label, zones] : layouts) {
    std::optional<double> times[2];
    for (int h = 1; h >= 0; --h) {
      allreduce_case c{zones, h == 1};
      std::string error;
      times[h] = run_allreduce(c, count, reps, link, error);
      const double floor = link_floor(c, count * 4, link);
      if (!times[h]) {
        std::printf("%-22s %-13s failed: %s\n", label.c_str(), h ? "hierarchical" : "flat ring", error.c_str());
        continue;
      }
      auto predicted = predicted_allreduce(zones, count, link, local_gbytes_per_s, h == 1, error);
      std::printf("%-22s %-13s %9.3fs %9.3fs %9.3fs %9.2fx%s\n", label.c_str(), h ? "hierarchical" : "flat ring",
                  *times[h], floor, predicted.value_or(0), predicted.value_or(0) / *times[h],
                  predicted ? "" : (" (" + error + ")").c_str());
    }
    if (times[0] && times[1])
      std::printf("%-22s flat ring / hierarchical: %.2fx\n", label.c_str(), *times[0] / *times[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measures the training data plane: point-to-point channels and the cross-zone all-reduce"};
  bool quick = false, no_netns = false, skip_allreduce = false;
  app.add_flag("--quick", quick, "fewer sizes and repetitions");
  app.add_flag("--no-netns", no_netns, "skip the run across network namespaces");
  app.add_flag("--skip-allreduce", skip_allreduce, "only the point-to-point part");
  int peer_rank = -1;
  std::string store_dir;
  int peer_rounds = 0;
  app.add_option("--peer-rank", peer_rank, "(internal) run one UCX rank in this namespace")->group("");
  app.add_option("--store-dir", store_dir, "(internal) the ranks' meeting folder")->group("");
  app.add_option("--rounds", peer_rounds, "(internal) messages of the smallest size")->group("");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::size_t> sizes;
  for (std::size_t s = 64 << 10; s <= (quick ? 4u << 20 : 64u << 20); s *= 4) sizes.push_back(s);
  const int rounds = quick ? 64 : 256;
  if (peer_rank >= 0) return run_peer_rank(peer_rank, store_dir, sizes, peer_rounds);
  const double local_rate = print_p2p(sizes, rounds, false, quick);
  if (!no_netns) {
    if (::geteuid() != 0 || !make_namespaces())
      std::printf("\n(network namespaces unavailable: needs root and `ip`; skipped)\n");
    else {
      print_p2p(sizes, rounds, true, quick);
      remove_namespaces();
    }
  }
  if (!skip_allreduce) print_allreduce(quick, local_rate > 0 ? local_rate : 1.0);
  return 0;
}
