#pragma once
/// CUDA devices as comm sees them: what a node has (device count and memory, for its
/// inventory), page-locked host buffers and streams for copies between host and device.
///
/// Declared in every build, so callers need no #ifdef: a build without the CUDA toolkit
/// (SAILOR_WITH_CUDA off) answers every call with an error that says so. With the toolkit,
/// these call the CUDA runtime only (no LibTorch); on a machine without a driver or without a
/// GPU each call returns the runtime's reason as an error, never crashes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sailor/comm/non_copyable.hpp>
#include <sailor/comm/tensor.hpp>
#include <sailor/config/error.hpp>

namespace sailor::comm {

/// True when this build has the CUDA toolkit and NCCL (comm's CUDA and NCCL code is built).
bool cuda_built();

/// The number of CUDA devices this process sees (at least 1), or why there are none: not
/// built with CUDA, no driver, or no device (the message names the CUDA runtime's error).
result<int> cuda_device_count();

/// Memory of one device.
struct cuda_device_memory {
  int device = 0;
  std::string name;                ///< the device's product name
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;    ///< free now (cudaMemGetInfo: creates the device's context)
};

/// Total and free memory of device `device`; the error names `cuda:N` and the reason.
result<cuda_device_memory> cuda_memory_info(int device);

/// `bytes` of page-locked host memory, usable by asynchronous copies to and from any device;
/// freed when the last copy of the buffer goes. The error says why (no driver, out of memory).
result<payload_buffer> allocate_pinned(std::size_t bytes);

struct pinned_pool_state;

/// Pinned buffers kept for reuse. Page-locking memory costs milliseconds per allocation (the
/// pages are locked one by one), too slow for a staging buffer per transfer; a buffer taken
/// here goes back to the pool when its last copy goes (or is freed, past `keep_bytes` kept, or
/// once the pool is gone). Thread-safe. Sizes are rounded up to a power of two (at least 4
/// KiB) so buffers of similar sizes are shared.
class pinned_pool : non_copyable {
public:
  explicit pinned_pool(std::size_t keep_bytes = std::size_t{256} << 20);
  ~pinned_pool();
  /// A buffer of `bytes` (size() == bytes); the error says why (no driver, out of memory).
  result<payload_buffer> take(std::size_t bytes);
  /// Bytes of buffers waiting in the pool for reuse.
  std::size_t kept_bytes() const;

private:
  std::shared_ptr<pinned_pool_state> state_;
};

/// A non-blocking stream on one device, ordered after the work already queued on that
/// device's legacy default stream when asked. One owner; one thread issues its work.
class cuda_stream : non_copyable {
public:
  /// A stream on `device`; the error names `cuda:N` and the reason.
  static result<std::unique_ptr<cuda_stream>> create(int device);

  ~cuda_stream();

  int device() const { return device_; }
  /// The cudaStream_t, for code that includes cuda_runtime.h (NCCL calls, kernels).
  void* native() const { return stream_; }

  /// Makes later work on this stream wait for what the device's default stream has queued
  /// (where a CUDA LibTorch queues its kernels unless told otherwise).
  status order_after_default_stream();
  /// Queues a copy of `bytes` from `src` to `dst` (host or device pointers, either way).
  status copy_async(void* dst, const void* src, std::size_t bytes);
  /// Waits for everything queued, polling, at most `timeout`; an error names the stream's
  /// device and the reason (the CUDA error, or the timeout).
  status synchronize(std::chrono::milliseconds timeout);

  /// Use create(); public for std::make_unique.
  cuda_stream(int device, void* stream, void* ready) : device_(device), stream_(stream), ready_(ready) {}

private:
  int device_ = -1;
  void* stream_ = nullptr;  // cudaStream_t
  void* ready_ = nullptr;   // cudaEvent_t, for order_after_default_stream
};

}  // namespace sailor::comm
