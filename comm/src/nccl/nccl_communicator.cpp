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
// zones activations go through the UCX transport anyway.

#include <sailor/comm/collective.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <gloo/rendezvous/prefix_store.h>

#include "../gloo/gloo_store.hpp"

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

// A receive staged in host memory: Gloo fills `host_`, then the bytes are copied to the
// device buffer on the owning thread (in wait() or in the test() that sees completion).
class staged_recv final : public request {
public:
  staged_recv(std::vector<char> host, std::unique_ptr<request> inner, void* device_ptr, int device)
      : host_(std::move(host)), inner_(std::move(inner)), device_ptr_(device_ptr), device_(device) {}

  status wait(std::chrono::milliseconds timeout) override {
    if (auto st = inner_->wait(timeout)) return st;
    return finish();
  }
  bool test() override {
    if (!inner_->test()) return false;
    outcome_ = finish();
    return true;
  }

private:
  status finish() {
    if (copied_) return outcome_;
    copied_ = true;
    cudaSetDevice(device_);
    auto e = cudaMemcpy(device_ptr_, host_.data(), host_.size(), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return error::failed("recv copy to device: " + cuda_message(e));
    return {};
  }

  std::vector<char> host_;
  std::unique_ptr<request> inner_;
  void* device_ptr_;
  int device_;
  bool copied_ = false;
  status outcome_;
};

// A send staged in host memory (the bytes were copied before the request was made).
class staged_send final : public request {
public:
  staged_send(std::vector<char> host, std::unique_ptr<request> inner)
      : host_(std::move(host)), inner_(std::move(inner)) {}
  ~staged_send() override { inner_.reset(); }  // waits for the transfer before host_ goes
  status wait(std::chrono::milliseconds timeout) override { return inner_->wait(timeout); }
  bool test() override { return inner_->test(); }

private:
  std::vector<char> host_;
  std::unique_ptr<request> inner_;
};

class failed_request final : public request {
public:
  explicit failed_request(error e) : error_(std::move(e)) {}
  status wait(std::chrono::milliseconds) override { return error_; }
  bool test() override { return true; }

private:
  error error_;
};

class nccl_communicator final : public communicator {
public:
  nccl_communicator(std::string name, ncclComm_t comm, cudaStream_t stream, cudaEvent_t ready,
                    void* scratch, int rank, int size, int device,
                    std::unique_ptr<communicator> host, std::chrono::milliseconds timeout)
      : name_(std::move(name)), comm_(comm), stream_(stream), ready_(ready), scratch_(scratch),
        rank_(rank), size_(size), device_(device), host_(std::move(host)), timeout_(timeout) {}

  ~nccl_communicator() override {
    cudaSetDevice(device_);
    if (comm_) {
      if (failed_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (scratch_) cudaFree(scratch_);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
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
    return run("all_reduce", [&] {
      return ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.type),
                           op == reduce_op::max ? ncclMax : ncclSum, comm_, stream_);
    });
  }

  status broadcast(buffer_view buf, int root) override {
    return run("broadcast", [&] {
      return ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.type), root, comm_, stream_);
    });
  }

  status all_gather(buffer_view in, buffer_view out) override {
    if (out.bytes() != in.bytes() * static_cast<std::size_t>(size_))
      return error::invalid_input("", "[comm " + name_ + "] all_gather: output must hold size() inputs");
    return run("all_gather", [&] {
      return ncclAllGather(in.data, out.data, in.count, nccl_type(in.type), comm_, stream_);
    });
  }

  status barrier() override {
    return run("barrier", [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_);
    });
  }

  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    std::vector<char> host(buf.bytes());
    if (auto st = to_host(buf, host.data())) return std::make_unique<failed_request>(*st);
    auto inner = host_->isend({host.data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_send>(std::move(host), std::move(inner));
  }

  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    std::vector<char> host(buf.bytes());
    auto inner = host_->irecv({host.data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_recv>(std::move(host), std::move(inner), buf.data, device_);
  }

  result<int> wait_any(const std::vector<request*>& requests,
                       std::chrono::milliseconds timeout) override {
    return communicator::wait_any(requests, timeout);
  }

private:
  // Orders our stream after the default stream, so buffers written there are complete.
  status order_after_default_stream() {
    auto e = cudaEventRecord(ready_, cudaStreamLegacy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_, ready_, 0);
    if (e != cudaSuccess) return error::failed("[comm " + name_ + "] " + cuda_message(e));
    return {};
  }

  status wait_stream(const char* what) {
    auto deadline = clock_type::now() + timeout_;
    for (;;) {
      auto e = cudaStreamQuery(stream_);
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
    if (auto st = order_after_default_stream()) return st;
    auto r = fn();
    if (r != ncclSuccess) {
      failed_ = true;
      return error::failed("[comm " + name_ + "] " + what + ": " + nccl_message(r));
    }
    return wait_stream(what);
  }

  status to_host(buffer_view buf, void* host) {
    cudaSetDevice(device_);
    if (auto st = order_after_default_stream()) return st;
    auto e = cudaMemcpyAsync(host, buf.data, buf.bytes(), cudaMemcpyDeviceToHost, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) return error::failed("[comm " + name_ + "] send copy: " + cuda_message(e));
    return {};
  }

  std::string name_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t ready_;
  void* scratch_;
  int rank_, size_, device_;
  std::unique_ptr<communicator> host_;
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

  result<std::unique_ptr<communicator>> create(const std::string& name,
                                               const std::vector<int>& global_ranks) override {
    // The host group first: it is also the rendezvous that every member has arrived.
    auto host = host_->create(name + "/host", global_ranks);
    if (!host) return host.error();
    const int rank = (*host)->rank(), size = (*host)->size();
    ncclUniqueId id;
    try {
      gloo::rendezvous::PrefixStore store(options_.prefix + "/nccl/" + name, *store_);
      if (rank == 0) {
        if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
          return error::failed("[comm " + name + "] ncclGetUniqueId: " + nccl_message(r));
        store.set("id", std::vector<char>(reinterpret_cast<char*>(&id), reinterpret_cast<char*>(&id) + sizeof id));
      } else {
        store.wait({"id"}, options_.timeout);
        auto bytes = store.get("id");
        if (bytes.size() != sizeof id)
          return error::failed("[comm " + name + "] malformed NCCL unique id");
        std::memcpy(&id, bytes.data(), sizeof id);
      }
    } catch (const std::exception& e) {
      return error::disconnected("[comm " + name + "] NCCL id exchange: " + e.what());
    }
    auto e = cudaSetDevice(device_);
    if (e != cudaSuccess) return error::failed("cudaSetDevice: " + cuda_message(e));
    ncclComm_t comm = nullptr;
    if (auto r = ncclCommInitRank(&comm, size, id, rank); r != ncclSuccess)
      return error::failed("[comm " + name + "] ncclCommInitRank: " + nccl_message(r));
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr;
    void* scratch = nullptr;
    e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc(&scratch, sizeof(int));
    if (e != cudaSuccess) {
      ncclCommDestroy(comm);
      if (stream) cudaStreamDestroy(stream);
      if (ready) cudaEventDestroy(ready);
      return error::failed("[comm " + name + "] " + cuda_message(e));
    }
    return std::unique_ptr<communicator>(std::make_unique<nccl_communicator>(
        name, comm, stream, ready, scratch, rank, size, device_, std::move(*host), options_.timeout));
  }

private:
  int global_rank_, device_;
  gloo_options options_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<communicator_factory> host_;
};

}  // namespace

result<std::unique_ptr<communicator_factory>> make_nccl_factory(int global_rank, int device,
                                                                 const gloo_options& options) {
  auto store = make_gloo_store(options);
  if (!store) return store.error();
  auto host = make_gloo_factory(global_rank, options);
  if (!host) return host.error();
  return std::unique_ptr<communicator_factory>(std::make_unique<nccl_factory>(
      global_rank, device, options, std::move(*store), std::move(*host)));
}

}  // namespace sailor::comm
