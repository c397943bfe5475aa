// The NCCL backend of the collective interface (built only with SAILOR_WITH_CUDA).
//
// Collectives run on a stream of the communicator, ordered after the work already queued on
// the legacy default stream (where a CUDA-enabled LibTorch queues its kernels
// unless told otherwise), and each call waits for its stream with the communicator's
// timeout; on a timeout the NCCL communicator is aborted (a failed communicator stays failed).
//
// Point-to-point transfers are staged through host memory and carried by a Gloo communicator
// over the same ranks. NCCL's send/recv would serialize with every other operation of the
// communicator (one strong stream per communicator), so receives posted ahead of sends, as
// the pipeline executor posts them, could deadlock; Gloo's unbound buffers cannot. Across
// zones activations go through the UCX transport anyway. The staging buffers are pinned
// (page-locked) host memory from the communicator's pool (reused: pinning costs milliseconds),
// so the copies run at the link's speed and the send's copy on the communicator's stream.
//
// Arguments are checked before anything reaches NCCL (nccl_checks.hpp), and a factory
// refuses a group on a device this process cannot use before it meets its peers: on a machine
// without a driver or GPU, create() returns the CUDA runtime's reason.

#include <sailor/comm/collective.hpp>
#include <sailor/comm/cuda.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <gloo/rendezvous/prefix_store.h>

#include "../cuda/staged_requests.hpp"
#include "../gloo/gloo_store.hpp"
#include "nccl_checks.hpp"

namespace sailor::comm {
namespace {

using clock_type = std::chrono::steady_clock;

ncclDataType_t nccl_type(element_type t) {
  switch (t) {
    case element_type::f32: return ncclFloat32;
    case element_type::f64: return ncclFloat64;
    case element_type::f16: return ncclFloat16;
    case element_type::bf16: return ncclBfloat16;
    case element_type::i32: return ncclInt32;
    case element_type::i64: return ncclInt64;
    case element_type::u8: return ncclUint8;
  }
  return ncclUint8;
}

std::string cuda_message(cudaError_t e) { return cudaGetErrorString(e); }
std::string nccl_message(ncclResult_t r) { return ncclGetErrorString(r); }

using cuda_detail::failed_request;
using cuda_detail::staged_recv;
using cuda_detail::staged_send;

// What a communicator owns on its device, released in reverse order by the communicator.
struct device_state {
  ncclComm_t comm = nullptr;
  std::unique_ptr<cuda_stream> stream;
  void* scratch = nullptr;  // one int on the device, for barrier()
};

class nccl_communicator final : public communicator {
public:
  nccl_communicator(std::string name, device_state state, int rank, int size, int device,
                    std::unique_ptr<communicator> host, std::chrono::milliseconds timeout)
      : name_(std::move(name)), comm_(state.comm), stream_(std::move(state.stream)),
        scratch_(state.scratch), rank_(rank), size_(size), device_(device), host_(std::move(host)),
        timeout_(timeout) {}

  ~nccl_communicator() override {
    cudaSetDevice(device_);
    if (comm_) {
      if (failed_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (scratch_) cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  // The thread waiting on the stream sees the flag within one poll and aborts the NCCL
  // communicator itself (ncclCommAbort ends the kernels in flight, so no buffer is written
  // after the wait returned); the host group fails the staged point-to-point transfers.
  void abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      if (aborted_) return;
      why_ = why;
      aborted_ = true;
    }
    host_->abort(why);
  }

  status all_reduce(buffer_view buf, reduce_op op) override {
    if (auto st = nccl_detail::check_buffer(name_, "all_reduce", buf)) return st;
    return run("all_reduce", [&] {
      return ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.type),
                           op == reduce_op::max ? ncclMax : ncclSum, comm_, native());
    });
  }

  status broadcast(buffer_view buf, int root) override {
    if (auto st = nccl_detail::check_buffer(name_, "broadcast", buf)) return st;
    if (auto st = nccl_detail::check_root(name_, root, size_)) return st;
    return run("broadcast", [&] {
      return ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.type), root, comm_, native());
    });
  }

  status all_gather(buffer_view in, buffer_view out) override {
    if (auto st = nccl_detail::check_gather(name_, in, out, size_)) return st;
    return run("all_gather", [&] {
      return ncclAllGather(in.data, out.data, in.count, nccl_type(in.type), comm_, native());
    });
  }

  status barrier() override {
    return run("barrier", [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, native());
    });
  }

  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    if (auto st = check_transfer("isend", buf, peer)) return std::make_unique<failed_request>(*st);
    auto host = staging_.take(buf.bytes());
    if (!host) return std::make_unique<failed_request>(host.error());
    if (auto st = to_host(buf, host->data())) return std::make_unique<failed_request>(*st);
    auto inner = host_->isend({host->data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_send>(std::move(*host), std::move(inner));
  }

  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    if (auto st = check_transfer("irecv", buf, peer)) return std::make_unique<failed_request>(*st);
    auto host = staging_.take(buf.bytes());
    if (!host) return std::make_unique<failed_request>(host.error());
    auto inner = host_->irecv({host->data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_recv>(std::move(*host), std::move(inner), buf.data, device_);
  }

  result<int> wait_any(const std::vector<request*>& requests,
                       std::chrono::milliseconds timeout) override {
    return communicator::wait_any(requests, timeout);
  }

private:
  cudaStream_t native() const { return static_cast<cudaStream_t>(stream_->native()); }

  status check_transfer(const char* op, buffer_view buf, int peer) {
    if (aborted_) return aborted_error();
    if (auto st = nccl_detail::check_buffer(name_, op, buf)) return st;
    return nccl_detail::check_peer(name_, op, peer, rank_, size_);
  }

  status wait_stream(const char* what) {
    auto deadline = clock_type::now() + timeout_;
    for (;;) {
      auto e = cudaStreamQuery(native());
      if (e == cudaSuccess) return {};
      if (e != cudaErrorNotReady) {
        failed_ = true;
        return error::failed("[comm " + name_ + "] " + what + ": " + cuda_message(e));
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess) {
        failed_ = true;
        return error::disconnected("[comm " + name_ + "] " + what + ": " + nccl_message(async));
      }
      if (aborted_) {
        failed_ = true;
        ncclCommAbort(comm_);
        comm_ = nullptr;
        return aborted_error();
      }
      if (clock_type::now() > deadline) {
        failed_ = true;
        return error::disconnected("[comm " + name_ + "] " + what + " timed out");
      }
      std::this_thread::yield();
    }
  }

  error aborted_error() {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return error::disconnected("[comm " + name_ + "] aborted: " + why_);
  }

  template <class Fn>
  status run(const char* what, Fn&& fn) {
    if (aborted_) return aborted_error();
    if (failed_) return error::disconnected("[comm " + name_ + "] communicator failed earlier");
    cudaSetDevice(device_);
    if (auto st = stream_->order_after_default_stream()) return st;
    auto r = fn();
    if (r != ncclSuccess) {
      failed_ = true;
      return error::failed("[comm " + name_ + "] " + what + ": " + nccl_message(r));
    }
    return wait_stream(what);
  }

  status to_host(buffer_view buf, void* host) {
    if (auto st = stream_->order_after_default_stream()) return st;
    if (auto st = stream_->copy_async(host, buf.data, buf.bytes())) return st;
    return stream_->synchronize(timeout_);
  }

  std::string name_;
  ncclComm_t comm_;
  std::unique_ptr<cuda_stream> stream_;
  void* scratch_;
  int rank_, size_, device_;
  std::unique_ptr<communicator> host_;
  pinned_pool staging_;  // host buffers of send/recv (a request may outlive it: see pinned_pool)
  std::chrono::milliseconds timeout_;
  bool failed_ = false;
  std::mutex abort_mutex_;
  std::atomic<bool> aborted_{false};
  std::string why_;
};

class nccl_factory final : public communicator_factory {
public:
  nccl_factory(int global_rank, int device, gloo_options options,
               std::shared_ptr<gloo::rendezvous::Store> store,
               std::unique_ptr<communicator_factory> host)
      : global_rank_(global_rank), device_(device), options_(std::move(options)),
        store_(std::move(store)), host_(std::move(host)) {}

  int global_rank() const override { return global_rank_; }

  // Local refusals first (arguments, the name, the device), so that a rank that cannot take
  // part says why at once instead of holding its peers in the rendezvous.
  result<std::unique_ptr<communicator>> create(const std::string& name,
                                               const std::vector<int>& global_ranks) override {
    if (auto st = nccl_detail::check_group(name, global_ranks, global_rank_)) return *st;
    if (auto st = names_.claim(name)) return *st;
    auto stream = cuda_stream::create(device_);
    if (!stream) return error::failed("[comm " + name + "] " + stream.error().message);
    // The host group next: it is also the rendezvous that every member has arrived.
    auto host = host_->create(name + "/host", global_ranks);
    if (!host) return host.error();
    const int rank = (*host)->rank(), size = (*host)->size();
    auto id = exchange_id(name, rank);
    if (!id) return id.error();
    device_state state;
    state.stream = std::move(*stream);
    cudaSetDevice(device_);
    if (auto r = ncclCommInitRank(&state.comm, size, *id, rank); r != ncclSuccess)
      return error::failed("[comm " + name + "] ncclCommInitRank on cuda:" + std::to_string(device_) +
                           ": " + nccl_message(r));
    if (auto e = cudaMalloc(&state.scratch, sizeof(int)); e != cudaSuccess) {
      ncclCommDestroy(state.comm);
      return error::failed("[comm " + name + "] cuda:" + std::to_string(device_) + ": " + cuda_message(e));
    }
    return std::unique_ptr<communicator>(std::make_unique<nccl_communicator>(
        name, std::move(state), rank, size, device_, std::move(*host), options_.timeout));
  }

private:
  // Rank 0 makes the group's NCCL id and publishes it under the group's name; the others
  // read it (bounded by the options' timeout).
  result<ncclUniqueId> exchange_id(const std::string& name, int rank) {
    ncclUniqueId id;
    try {
      gloo::rendezvous::PrefixStore store(options_.prefix + "/nccl/" + name, *store_);
      if (rank == 0) {
        if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
          return error::failed("[comm " + name + "] ncclGetUniqueId: " + nccl_message(r));
        const char* bytes = reinterpret_cast<const char*>(&id);
        store.set("id", std::vector<char>(bytes, bytes + sizeof id));
      } else {
        store.wait({"id"}, options_.timeout);
        auto bytes = store.get("id");
        if (bytes.size() != sizeof id)
          return error::failed("[comm " + name + "] malformed NCCL unique id (" +
                               std::to_string(bytes.size()) + " bytes)");
        std::memcpy(&id, bytes.data(), sizeof id);
      }
    } catch (const std::exception& e) {
      return error::disconnected("[comm " + name + "] NCCL id exchange: " + e.what());
    }
    return id;
  }

  int global_rank_, device_;
  gloo_options options_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<communicator_factory> host_;
  nccl_detail::group_names names_;
};

}  // namespace

result<std::unique_ptr<communicator_factory>> make_nccl_factory(int global_rank, int device,
                                                                 const gloo_options& options) {
  if (device < 0)
    return error::invalid_input("device", "NCCL factory: cuda:" + std::to_string(device) +
                                              " is not a device (give 0 or more)");
  if (global_rank < 0)
    return error::invalid_input("global_rank", "NCCL factory: negative global rank " +
                                                   std::to_string(global_rank));
  auto store = make_gloo_store(options);
  if (!store) return store.error();
  auto host = make_gloo_factory(global_rank, options);
  if (!host) return host.error();
  return std::unique_ptr<communicator_factory>(std::make_unique<nccl_factory>(
      global_rank, device, options, std::move(*store), std::move(*host)));
}

}  // namespace sailor::comm
