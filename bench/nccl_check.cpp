// The device checks of scripts/gpu-check.sh (built only with SAILOR_WITH_CUDA): on a machine
// with NVIDIA GPUs, each device's memory (comm::cuda_memory_info, and a 1 GiB allocation seen
// in it), pinned host <-> device copies through comm::cuda_stream, and comm's NCCL
// communicator with one rank thread per GPU: all-reduce (sum, max), broadcast and all-gather
// checked element by element, all-reduce throughput, and point to point (staged through
// pinned host memory and Gloo) when there are two GPUs or more; and comm's device channel
// (device buffers over the TCP transport channel, any GPU count). Prints figures, asserts
// correctness only.
//
//   build/bench/nccl_check [--ranks N] [--max-mib M] [--iters K] [--require-gpu 1]
//
// Exit: 0 every check passed (or no usable GPU: the reason is printed, so `make bench` goes
// on), 1 a check failed, 2 bad option, 3 no usable GPU with --require-gpu (gpu-check.sh calls
// that its "no GPU" mode).
//
// Not yet checked here: comm's hierarchical all-reduce, which works on host memory
// (comm/src/hierarchical.cpp copies shards with memcpy), so it cannot take device buffers yet.

#include <sailor/comm/channel.hpp>
#include <sailor/comm/collective.hpp>
#include <sailor/comm/cuda.hpp>
#include <sailor/comm/device_channel.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace sailor;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct options {
  int ranks = 0;  // 0: one per device
  int max_mib = 256;
  int iters = 20;
  bool require_gpu = false;
};

// Failures of any rank thread, printed at the end.
struct failures {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    std::fprintf(stderr, "FAIL %s\n", line.c_str());
    lines.push_back(line);
  }
};

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// A float buffer on `device`, freed on scope exit.
struct device_floats {
  float* data = nullptr;
  std::size_t count = 0;
  device_floats(int device, std::size_t n) : count(n) {
    cudaSetDevice(device);
    if (cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)) != cudaSuccess) data = nullptr;
  }
  ~device_floats() { if (data) cudaFree(data); }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  comm::buffer_view view() const { return {data, count, comm::element_type::f32}; }
  void put(const std::vector<float>& host) { cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice); }
  std::vector<float> get() const {
    std::vector<float> host(count);
    cudaMemcpy(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost);
    return host;
  }
};

// Each device's memory, and a 1 GiB allocation that its free memory must show.
void check_memory(int devices, failures& failed) {
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  for (int d = 0; d < devices; ++d) {
    auto before = comm::cuda_memory_info(d);
    if (!before) { failed.add(before.error().message); continue; }
    std::printf("cuda:%d %s: %.1f GiB total, %.1f GiB free\n", d, before->name.c_str(),
                double(before->total_bytes) / gib, double(before->free_bytes) / gib);
    device_floats block(d, gib / sizeof(float));
    auto during = comm::cuda_memory_info(d);
    const std::uint64_t dropped =
        during && before->free_bytes > during->free_bytes ? before->free_bytes - during->free_bytes : 0;
    if (!block.data || dropped + (64u << 20) < gib)  // 64 MiB of slack for other users
      failed.add("cuda:" + std::to_string(d) + ": a 1 GiB allocation did not show in cudaMemGetInfo");
  }
}

// Pinned host <-> device copies on a comm::cuda_stream: correctness and GB/s.
void check_copies(int device, std::size_t bytes, failures& failed) {
  auto stream = comm::cuda_stream::create(device);
  auto host = comm::allocate_pinned(bytes), back = comm::allocate_pinned(bytes);
  device_floats dev(device, bytes / sizeof(float));
  if (!stream || !host || !back || !dev.data) { failed.add("cuda:" + std::to_string(device) + ": copy setup"); return; }
  for (std::size_t i = 0; i < bytes; ++i) host->data()[i] = std::byte(i * 7 % 253);
  auto& s = **stream;
  auto t0 = clock_type::now();
  auto st = s.copy_async(dev.data, host->data(), bytes);
  if (!st) st = s.synchronize(30s);
  const double h2d = seconds_since(t0);
  t0 = clock_type::now();
  if (!st) st = s.copy_async(back->data(), dev.data, bytes);
  if (!st) st = s.synchronize(30s);
  const double d2h = seconds_since(t0);
  if (st) { failed.add(st->message); return; }
  if (std::memcmp(host->data(), back->data(), bytes) != 0) failed.add("pinned round trip changed the bytes");
  std::printf("cuda:%d pinned copies of %zu MiB: host->device %.1f GB/s, device->host %.1f GB/s\n", device,
              bytes >> 20, bytes / h2d / 1e9, bytes / d2h / 1e9);
}

// Sum, max, broadcast and all-gather on small buffers, checked element by element.
void check_collectives(comm::communicator& c, int device, failures& failed) {
  const int r = c.rank(), n = c.size();
  const std::string who = "[rank " + std::to_string(r) + "] ";
  device_floats buf(device, 1024), gathered(device, 1024 * n);
  buf.put(std::vector<float>(1024, float(r + 1)));
  if (auto st = c.all_reduce(buf.view())) return failed.add(who + st->message);
  if (buf.get()[1023] != float(n * (n + 1) / 2)) failed.add(who + "all_reduce sum is wrong");
  buf.put(std::vector<float>(1024, float(r)));
  if (auto st = c.all_reduce(buf.view(), comm::reduce_op::max)) return failed.add(who + st->message);
  if (buf.get()[0] != float(n - 1)) failed.add(who + "all_reduce max is wrong");
  buf.put(std::vector<float>(1024, float(100 + r)));
  if (auto st = c.broadcast(buf.view(), n - 1)) return failed.add(who + st->message);
  if (buf.get()[512] != float(100 + n - 1)) failed.add(who + "broadcast is wrong");
  buf.put(std::vector<float>(1024, float(r)));
  if (auto st = c.all_gather(buf.view(), gathered.view())) return failed.add(who + st->message);
  auto all = gathered.get();
  for (int k = 0; k < n; ++k)
    if (all[k * 1024 + 7] != float(k)) failed.add(who + "all_gather slot " + std::to_string(k) + " is wrong");
  if (auto st = c.barrier()) failed.add(who + st->message);
}

// All-reduce throughput from 1 MiB to max_mib; rank 0 prints algorithm and bus bandwidth.
void time_all_reduce(comm::communicator& c, int device, const options& o, failures& failed) {
  for (int mib = 1; mib <= o.max_mib; mib *= 4) {
    device_floats buf(device, std::size_t(mib) << 18);
    if (!buf.data) return failed.add("cudaMalloc of " + std::to_string(mib) + " MiB");
    if (auto st = c.all_reduce(buf.view())) return failed.add(st->message);  // warm-up
    auto t0 = clock_type::now();
    for (int i = 0; i < o.iters; ++i)
      if (auto st = c.all_reduce(buf.view())) return failed.add(st->message);
    const double each = seconds_since(t0) / o.iters, n = c.size(), bytes = double(mib) * (1 << 20);
    if (c.rank() == 0)  // bus bandwidth: what each rank's links carry in a ring, 2(n-1)/n of it
      std::printf("all_reduce %4d MiB x %d ranks: %8.3f ms, algbw %6.1f GB/s, busbw %6.1f GB/s\n", mib,
                  c.size(), each * 1e3, bytes / each / 1e9, bytes / each / 1e9 * 2 * (n - 1) / n);
  }
}

// Rank 0 sends 64 MiB to rank 1 (staged through pinned host memory and Gloo).
void check_send_recv(comm::communicator& c, int device, failures& failed) {
  if (c.rank() > 1) return;
  const std::size_t count = std::size_t(64) << 18;
  device_floats buf(device, count);
  buf.put(std::vector<float>(count, c.rank() == 0 ? 42.0f : 0.0f));
  auto t0 = clock_type::now();
  auto st = c.rank() == 0 ? c.send(buf.view(), 1, 5) : c.recv(buf.view(), 0, 5);
  if (st) return failed.add(st->message);
  if (c.rank() == 1) {
    const double took = seconds_since(t0);
    if (buf.get()[count - 1] != 42.0f) failed.add("send/recv delivered wrong bytes");
    std::printf("send/recv 64 MiB rank 0 -> 1 (staged through host): %.1f ms, %.2f GB/s\n", took * 1e3,
                (count * 4) / took / 1e9);
  }
}

// Two ranks on device 0 (any GPU count) joined by device channels over comm's TCP transport
// channel on loopback: 64 MiB from rank 0 to rank 1, staged through pinned host memory.
void check_device_channel(failures& failed) {
  auto store = comm::make_memory_store();
  const std::size_t count = std::size_t(64) << 18;
  auto rank = [&](int r) {
    comm::transport_channel_options o;
    o.store = store;
    o.timeout = 30s;
    auto inner = comm::make_transport_channel_factory(r, o)->create("device-p2p", {1 - r});
    if (!inner) return failed.add(inner.error().message);
    auto c = comm::make_device_channel(std::move(*inner), 0);
    if (!c) return failed.add(c.error().message);
    device_floats buf(0, count);
    buf.put(std::vector<float>(count, r == 0 ? 7.0f : 0.0f));
    auto t0 = clock_type::now();
    auto req = r == 0 ? (*c)->isend(buf.view(), 1, 9) : (*c)->irecv(buf.view(), 0, 9);
    if (auto st = req->wait(30s)) return failed.add(st->message);
    if (r == 0) return;
    const double took = seconds_since(t0);
    if (buf.get()[count / 2] != 7.0f) failed.add("device channel delivered wrong bytes");
    std::printf("device channel 64 MiB cuda:0 -> cuda:0 over %s: %.1f ms, %.2f GB/s\n", (*c)->backend().c_str(),
                took * 1e3, (count * 4) / took / 1e9);
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
}

// One thread per rank, rank r on device r, meeting through an in-process store.
void run_ranks(int n, const options& o, failures& failed) {
  comm::gloo_options go;
  go.in_process_store = comm::make_in_process_store();
  go.timeout = 60s;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&go, &o, &failed, n, r] {
      auto factory = comm::make_nccl_factory(r, r, go);
      if (!factory) return failed.add(factory.error().message);
      std::vector<int> all(n);
      for (int k = 0; k < n; ++k) all[k] = k;
      auto c = (*factory)->create("world", all);
      if (!c) return failed.add(c.error().message);
      check_collectives(**c, r, failed);
      time_all_reduce(**c, r, o, failed);
      if (n >= 2) check_send_recv(**c, r, failed);
    });
  for (auto& t : threads) t.join();
  if (n < 2) std::printf("send/recv: skipped (needs 2 GPUs; NCCL takes one rank per GPU)\n");
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (value <= 0) return std::fprintf(stderr, "nccl_check: %s needs a positive number\n", flag.c_str()), false;
    if (flag == "--ranks") o.ranks = value;
    else if (flag == "--max-mib") o.max_mib = value;
    else if (flag == "--iters") o.iters = value;
    else if (flag == "--require-gpu") o.require_gpu = true;
    else return std::fprintf(stderr, "nccl_check: unknown option %s\n", flag.c_str()), false;
  }
  if (argc % 2 == 0) return std::fprintf(stderr, "nccl_check: %s needs a value\n", argv[argc - 1]), false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) return 2;
  auto devices = comm::cuda_device_count();
  if (!devices) {
    std::printf("nccl_check: no GPU: %s\n", devices.error().message.c_str());
    return o.require_gpu ? 3 : 0;
  }
  const int n = o.ranks > 0 ? o.ranks : *devices;
  if (n > *devices) {
    std::fprintf(stderr, "nccl_check: --ranks %d: this machine has %d GPU(s) (one rank per GPU)\n", n, *devices);
    return 2;
  }
  failures failed;
  const auto t0 = clock_type::now();
  check_memory(*devices, failed);
  check_copies(0, std::size_t(o.max_mib) << 20, failed);
  check_device_channel(failed);
  run_ranks(n, o, failed);
  std::printf("nccl_check: %d GPU(s), %d rank(s), %.1f s, %s\n", *devices, n, seconds_since(t0),
              failed.lines.empty() ? "all checks passed" : (std::to_string(failed.lines.size()) + " failed").c_str());
  return failed.lines.empty() ? 0 : 1;
}
