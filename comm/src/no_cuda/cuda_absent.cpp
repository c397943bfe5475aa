// comm's CUDA calls in a build without the CUDA toolkit (SAILOR_WITH_CUDA off): each says so.

#include <sailor/comm/cuda.hpp>
#include <sailor/comm/device_channel.hpp>

namespace sailor::comm {
namespace {

error not_built(const std::string& what) {
  return error::unimplemented(what + ": this build has no CUDA (configured without the CUDA "
                                     "toolkit and NCCL, SAILOR_WITH_CUDA=OFF)");
}

}  // namespace

bool cuda_built() { return false; }

result<int> cuda_device_count() { return not_built("no CUDA device"); }

result<cuda_device_memory> cuda_memory_info(int device) {
  return not_built("cuda:" + std::to_string(device));
}

result<payload_buffer> allocate_pinned(std::size_t bytes) {
  return not_built("pinned host buffer");
}

struct pinned_pool_state {};
pinned_pool::pinned_pool(std::size_t) {}
pinned_pool::~pinned_pool() = default;
std::size_t pinned_pool::kept_bytes() const { return 0; }
result<payload_buffer> pinned_pool::take(std::size_t) { return not_built("pinned host buffer"); }

result<std::unique_ptr<cuda_stream>> cuda_stream::create(int device) {
  return not_built("cuda:" + std::to_string(device));
}

// Never made in this build (create() refuses), but the class is declared in every build.
cuda_stream::~cuda_stream() = default;
status cuda_stream::order_after_default_stream() { return not_built("cuda stream"); }
status cuda_stream::copy_async(void*, const void*, std::size_t) { return not_built("cuda stream"); }
status cuda_stream::synchronize(std::chrono::milliseconds) { return not_built("cuda stream"); }

result<std::unique_ptr<channel>> make_device_channel(std::unique_ptr<channel>, int device) {
  return not_built("device channel on cuda:" + std::to_string(device));
}

}  // namespace sailor::comm
