// comm's CUDA runtime calls (built only with SAILOR_WITH_CUDA): device count and memory,
// pinned host buffers, streams. The CUDA runtime loads the driver on its first call; without
// one every call answers cudaErrorInsufficientDriver (or cudaErrorNoDevice without a GPU),
// which is passed on as an error naming the device.

#include <sailor/comm/cuda.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <thread>

namespace sailor::comm {
namespace {

std::string device_name(int device) { return "cuda:" + std::to_string(device); }

error cuda_error(const std::string& what, cudaError_t e) {
  std::string why = cudaGetErrorString(e);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    why += " (no usable NVIDIA driver or GPU on this machine)";
  return error::failed(what + ": " + why + " [" + cudaGetErrorName(e) + "]");
}

// The device's index checked against the devices this process sees.
status check_device(int device) {
  auto count = cuda_device_count();
  if (!count)
    return error::failed(device_name(device) + ": " + count.error().message);
  if (device < 0 || device >= *count)
    return error::invalid_input("device", device_name(device) + ": no such device (this machine has " +
                                              std::to_string(*count) + ", cuda:0..cuda:" +
                                              std::to_string(*count - 1) + ")");
  return {};
}

}  // namespace

bool cuda_built() { return true; }

result<int> cuda_device_count() {
  int count = 0;
  auto e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clears the sticky error of the failed call
    return cuda_error("no CUDA device: cudaGetDeviceCount", e);
  }
  if (count <= 0) return error::failed("no CUDA device: the driver reports none");
  return count;
}

result<cuda_device_memory> cuda_memory_info(int device) {
  if (auto st = check_device(device)) return *st;
  cuda_device_memory out;
  out.device = device;
  cudaDeviceProp props{};
  auto e = cudaGetDeviceProperties(&props, device);
  if (e != cudaSuccess) return cuda_error(device_name(device) + ": cudaGetDeviceProperties", e);
  out.name = props.name;
  int previous = 0;
  cudaGetDevice(&previous);
  e = cudaSetDevice(device);
  std::size_t free_bytes = 0, total_bytes = 0;
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(previous);
  if (e != cudaSuccess) return cuda_error(device_name(device) + ": cudaMemGetInfo", e);
  out.total_bytes = total_bytes;
  out.free_bytes = free_bytes;
  return out;
}

result<payload_buffer> allocate_pinned(std::size_t bytes) {
  if (bytes == 0) return payload_buffer(nullptr, 0, nullptr);
  void* p = nullptr;
  auto e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess)
    return cuda_error("pinned host buffer of " + std::to_string(bytes) + " bytes: cudaHostAlloc", e);
  std::shared_ptr<void> owner(p, [](void* q) { cudaFreeHost(q); });
  return payload_buffer(static_cast<std::byte*>(p), bytes, std::move(owner));
}

// The pool's free buffers by capacity. Buffers handed out hold it weakly: the last one
// returned after the pool is gone frees itself.
struct pinned_pool_state {
  std::mutex mutex;
  std::multimap<std::size_t, void*> free;
  std::size_t kept = 0;
  std::size_t keep_limit = 0;

  ~pinned_pool_state() {
    for (auto& [capacity, p] : free) cudaFreeHost(p);
  }
  // Keeps `p` for reuse if there is room, else frees it.
  void give_back(std::size_t capacity, void* p) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (kept + capacity <= keep_limit) {
        free.emplace(capacity, p);
        kept += capacity;
        return;
      }
    }
    cudaFreeHost(p);
  }
};

pinned_pool::pinned_pool(std::size_t keep_bytes) : state_(std::make_shared<pinned_pool_state>()) {
  state_->keep_limit = keep_bytes;
}

pinned_pool::~pinned_pool() = default;

std::size_t pinned_pool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->kept;
}

result<payload_buffer> pinned_pool::take(std::size_t bytes) {
  if (bytes == 0) return payload_buffer(nullptr, 0, nullptr);
  const std::size_t capacity = std::max<std::size_t>(std::bit_ceil(bytes), 4096);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (auto it = state_->free.find(capacity); it != state_->free.end()) {
      p = it->second;
      state_->free.erase(it);
      state_->kept -= capacity;
    }
  }
  if (!p) {
    if (auto e = cudaHostAlloc(&p, capacity, cudaHostAllocPortable); e != cudaSuccess)
      return cuda_error("pinned host buffer of " + std::to_string(capacity) + " bytes: cudaHostAlloc", e);
  }
  std::weak_ptr<pinned_pool_state> pool = state_;
  std::shared_ptr<void> owner(p, [pool, capacity](void* q) {
    if (auto state = pool.lock())
      state->give_back(capacity, q);
    else
      cudaFreeHost(q);
  });
  return payload_buffer(static_cast<std::byte*>(p), bytes, std::move(owner));
}

result<std::unique_ptr<cuda_stream>> cuda_stream::create(int device) {
  if (auto st = check_device(device)) return *st;
  auto e = cudaSetDevice(device);
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    if (stream) cudaStreamDestroy(stream);
    return cuda_error(device_name(device) + ": stream", e);
  }
  return std::make_unique<cuda_stream>(device, stream, ready);
}

cuda_stream::~cuda_stream() {
  if (!stream_) return;
  cudaSetDevice(device_);
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

status cuda_stream::order_after_default_stream() {
  cudaSetDevice(device_);
  auto ready = static_cast<cudaEvent_t>(ready_);
  auto e = cudaEventRecord(ready, cudaStreamLegacy);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), ready, 0);
  if (e != cudaSuccess) return cuda_error(device_name(device_) + ": ordering after the default stream", e);
  return {};
}

status cuda_stream::copy_async(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return {};
  if (!dst || !src)
    return error::invalid_input("", device_name(device_) + ": copy of " + std::to_string(bytes) +
                                        " bytes with a null pointer");
  cudaSetDevice(device_);
  auto e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess)
    return cuda_error(device_name(device_) + ": copy of " + std::to_string(bytes) + " bytes", e);
  return {};
}

status cuda_stream::synchronize(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
    if (e == cudaSuccess) return {};
    if (e != cudaErrorNotReady) return cuda_error(device_name(device_) + ": stream", e);
    if (std::chrono::steady_clock::now() > deadline)
      return error::disconnected(device_name(device_) + ": stream work not done after " +
                                 std::to_string(timeout.count()) + " ms");
    std::this_thread::yield();
  }
}

}  // namespace sailor::comm
