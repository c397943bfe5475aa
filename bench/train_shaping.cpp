// How closely emulated links between zones hold to their configuration (the figures that
// tests/transport.test.cpp and tests/train_shaping.test.cpp assert only as floors):
//
//   1. the link shaper on comm's TCP transport, a 20 ms / 50 MB/s link: one-way latency of
//      small messages (best and median of 15) and the bandwidth of 4 MiB tensors back to back
//      (median gap of a burst of 6, median of 5 bursts), and the first tensor's arrival;
//   2. training (ranks as threads, the tiny GPT): a 100 ms link between the zones of two
//      pipeline stages, iteration time and receive waits with and without it, against 6
//      latencies (two 1F1B round trips and the loss all-reduce);
//   1b. the link probe on that link: the latency and bandwidths it reads, and its duration;
//   3. a 50 ms, 0.1 GB/s link between two data-parallel replicas: the all-reduce time per
//      iteration with and without it, against the ring model (2 steps per layer).
//
//   train_shaping [--iterations N]
#include <sailor/comm/link_probe.hpp>
#include <sailor/comm/shaping.hpp>
#include <sailor/comm/tcp.hpp>
#include <sailor/models/shapes.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <vector>

#include "../tests/support/zoned_training.hpp"

namespace {

using namespace sailor;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using testing::link_of;
using testing::median;
using testing::median_after_first;
using testing::make_plan;
using testing::zoned_stage;

// Arrival times at the receiving end of one shaped connection.
struct arrivals {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<clk::time_point> at;
  void add() {
    std::lock_guard<std::mutex> guard{mutex};
    at.push_back(clk::now());
    changed.notify_all();
  }
  bool wait_count(std::size_t n) {
    std::unique_lock<std::mutex> lock{mutex};
    return changed.wait_for(lock, 20s, [&] { return at.size() >= n; });
  }
};

comm::transport_options named(const std::string& name, const std::string& zone) {
  comm::transport_options o;
  o.local_name = name;
  o.local_zone = zone;
  return o;
}

int print_transport_shaping() {
  const auto link = link_of("zone-a", "zone-b", 0.020, 0.050);
  comm::link_lookup links = [link](const std::string&, const std::string&) { return link; };
  arrivals got;  // outlives the transports, whose callbacks fill it
  std::vector<std::byte> landing(4u << 20);
  auto server = comm::make_shaped_transport(comm::make_tcp_transport(named("server", "zone-a")).value(), links);
  auto client = comm::make_shaped_transport(comm::make_tcp_transport(named("client", "zone-b")).value(), links);
  auto listener = server->listen(comm::address{"127.0.0.1", 0}, [&](const comm::connection_ptr&) {
    comm::connection_handlers h;
    h.allocate = [&](const comm::tensor_descriptor& d) { return comm::payload_buffer(landing.data(), d.bytes, nullptr); };
    h.on_control = [&](std::vector<std::byte>) { got.add(); };
    h.on_tensor = [&](comm::tensor_descriptor, comm::payload_buffer) { got.add(); };
    return h;
  });
  if (!listener) {
    std::fprintf(stderr, "train_shaping: %s\n", listener.error().to_string().c_str());
    return 1;
  }
  auto conn = client->connect((*listener)->local_address(), comm::connection_handlers{});
  if (!conn) {
    std::fprintf(stderr, "train_shaping: %s\n", conn.error().to_string().c_str());
    return 1;
  }
  std::vector<double> one_way;
  for (int i = 0; i < 15; ++i) {
    auto sent = clk::now();
    (*conn)->send_control(std::vector<std::byte>(64), nullptr);
    if (!got.wait_count(static_cast<std::size_t>(i + 1))) return 1;
    std::lock_guard<std::mutex> guard{got.mutex};
    one_way.push_back(std::chrono::duration<double>(got.at.back() - sent).count());
  }
  const std::size_t mib4 = 4u << 20;
  std::vector<std::byte> payload(mib4, std::byte{7});
  std::vector<double> bandwidths, firsts;
  for (int burst = 0; burst < 5; ++burst) {
    std::size_t before = 0;
    {
      std::lock_guard<std::mutex> guard{got.mutex};
      before = got.at.size();
    }
    auto sent = clk::now();
    for (int i = 0; i < 6; ++i)
      (*conn)->send_tensor({comm::dtype::u8, {static_cast<std::int64_t>(mib4)}, 0, "", 0}, payload, nullptr);
    if (!got.wait_count(before + 6)) return 1;
    std::lock_guard<std::mutex> guard{got.mutex};
    firsts.push_back(std::chrono::duration<double>(got.at[before] - sent).count());
    std::vector<double> gaps;
    for (int i = 1; i < 6; ++i)
      gaps.push_back(std::chrono::duration<double>(got.at[before + i] - got.at[before + i - 1]).count());
    bandwidths.push_back(mib4 / median(gaps));
  }
  std::printf("link shaper over TCP, 20 ms / 50 MB/s: one-way latency best %.2f ms, median %.2f ms; "
              "bandwidth %.1f MB/s (median of 5 bursts); first 4 MiB after %.1f ms (expected %.1f)\n",
              *std::min_element(one_way.begin(), one_way.end()) * 1e3, median(one_way) * 1e3,
              median(bandwidths) / 1e6, median(firsts) * 1e3, (0.020 + mib4 / 50e6) * 1e3);
  (*conn)->close();
  return 0;
}

// The link probe on the same shaped link: what it reads, and how long it takes (its budget is
// about 0.6 s).
int print_link_probe() {
  const auto link = link_of("zone-a", "zone-b", 0.020, 0.050);
  comm::link_lookup links = [link](const std::string&, const std::string&) { return link; };
  auto responder = comm::make_shaped_transport(comm::make_tcp_transport(named("responder", "zone-a")).value(), links);
  auto prober = comm::make_shaped_transport(comm::make_tcp_transport(named("prober", "zone-b")).value(), links);
  auto listener = responder->listen(comm::address{"127.0.0.1", 0}, comm::probe_responder());
  if (!listener) {
    std::fprintf(stderr, "train_shaping: %s\n", listener.error().to_string().c_str());
    return 1;
  }
  auto probe = comm::probe_link(*prober, (*listener)->local_address());
  if (!probe) {
    std::fprintf(stderr, "train_shaping: %s\n", probe.error().to_string().c_str());
    return 1;
  }
  std::printf("link probe, 20 ms / 50 MB/s: latency %.2f ms; bandwidth", probe->latency_s * 1e3);
  for (const auto& [bytes, rate] : probe->bandwidth) std::printf(" %.0f KiB %.1f MB/s,", bytes / 1024, rate / 1e6);
  std::printf(" in %.3f s\n", probe->elapsed_s);
  return 0;
}

train::train_options shaped_options(std::vector<config::zone_link> links) {
  train::train_options o;
  o.seed = 7;
  o.learning_rate = 3e-3;
  o.torch_threads = 1;
  o.timeout = 60s;
  o.links = std::move(links);
  return o;
}

testing::zoned_run train_plan(const config::plan& plan, int iterations, std::vector<config::zone_link> links) {
  auto run = testing::train_zoned(plan, iterations, shaped_options(std::move(links)));
  for (const auto& e : run.errors)
    if (!e.empty()) std::fprintf(stderr, "train_shaping: %s\n", e.c_str());
  return run;
}

void print_pipeline_link(int iterations) {
  const auto plan = make_plan({zoned_stage(0, 3, "zone-a"), zoned_stage(3, 3, "zone-b")});
  const double latency = 0.100;
  const double expected = 6 * latency;
  auto plain = train_plan(plan, iterations, {});
  auto shaped = train_plan(plan, iterations, {link_of("zone-a", "zone-b", latency, 1.0)});
  auto total = [](const train::iteration_telemetry& t) { return t.total_s; };
  auto recv = [](const train::iteration_telemetry& t) { return t.recv_wait_s; };
  const double grew = median_after_first(shaped, 0, total) - median_after_first(plain, 0, total);
  const double recv_grew = median_after_first(shaped, 0, recv) + median_after_first(shaped, 1, recv) -
                           median_after_first(plain, 0, recv) - median_after_first(plain, 1, recv);
  std::printf("100 ms link between 2 pipeline stages: iteration %.4f -> %.4f s (+%.4f, model +%.4f, "
              "ratio %.2f); receive waits +%.4f s\n",
              median_after_first(plain, 0, total), median_after_first(shaped, 0, total), grew, expected,
              grew / expected, recv_grew);
}

void print_data_parallel_link(int iterations) {
  const auto plan = make_plan({zoned_stage(0, 6, "zone-a", "zone-b")});
  const auto link = link_of("zone-a", "zone-b", 0.050, 0.1);
  const double expected = testing::dp_link_all_reduce_s(link);
  auto plain = train_plan(plan, iterations, {});
  auto shaped = train_plan(plan, iterations, {link});
  auto all_reduce = [](const train::iteration_telemetry& t) { return t.all_reduce_s; };
  auto total = [](const train::iteration_telemetry& t) { return t.total_s; };
  for (int r = 0; r < 2; ++r)
    std::printf("50 ms DP link, rank %d: all-reduce per iteration %.4f -> %.4f s (model %.4f, ratio %.2f), "
                "iteration +%.4f s\n",
                r, median_after_first(plain, r, all_reduce), median_after_first(shaped, r, all_reduce), expected,
                median_after_first(shaped, r, all_reduce) / expected,
                median_after_first(shaped, r, total) - median_after_first(plain, r, total));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"emulated links: the shaper's latency and bandwidth, and what training sees"};
  int iterations = 6;
  app.add_option("--iterations", iterations, "training iterations per run (the first is not counted)")
    ->check(CLI::Range(2, 1000));
  CLI11_PARSE(app, argc, argv);
  if (int rc = print_transport_shaping(); rc != 0) return rc;
  if (int rc = print_link_probe(); rc != 0) return rc;
  print_pipeline_link(iterations);
  print_data_parallel_link(iterations);
  return 0;
}
