#pragma once
// Requests of transfers between device buffers that travel through host memory (private to
// comm's CUDA code: the NCCL communicator's point to point and the device channel). The host
// side is a pinned buffer (pinned_pool), kept by the request until the transfer is done.

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include <sailor/comm/collective.hpp>
#include <sailor/comm/tensor.hpp>

namespace sailor::comm::cuda_detail {

// A receive staged in host memory: `inner` fills `host`, then the bytes are copied to the
// device buffer by whichever thread sees completion first (in wait() or test()).
class staged_recv final : public request {
public:
  staged_recv(payload_buffer host, std::unique_ptr<request> inner, void* device_ptr, int device)
      : host_(std::move(host)), inner_(std::move(inner)), device_ptr_(device_ptr), device_(device) {}

  status wait(std::chrono::milliseconds timeout) override {
    if (copied_) return outcome_;
    auto st = inner_->wait(timeout);
    if (st && !inner_->test()) return st;  // not done yet: timed out
    return finish(std::move(st));
  }
  bool test() override {
    if (copied_) return true;
    if (!inner_->test()) return false;
    finish(inner_->wait(std::chrono::milliseconds{0}));  // done: its outcome at once
    return true;
  }

private:
  // Once the host transfer is done: its error, or the copy to the device (a failed receive
  // leaves the device buffer untouched).
  status finish(status received) {
    copied_ = true;
    if (received) return outcome_ = std::move(received);
    cudaSetDevice(device_);
    auto e = cudaMemcpy(device_ptr_, host_.data(), host_.size(), cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
      outcome_ = error::failed("recv copy to cuda:" + std::to_string(device_) + ": " + cudaGetErrorString(e));
    return outcome_;
  }

  payload_buffer host_;
  std::unique_ptr<request> inner_;
  void* device_ptr_;
  int device_;
  bool copied_ = false;
  status outcome_;
};

// A send staged in host memory (the bytes were copied before the request was made).
class staged_send final : public request {
public:
  staged_send(payload_buffer host, std::unique_ptr<request> inner)
      : host_(std::move(host)), inner_(std::move(inner)) {}
  ~staged_send() override { inner_.reset(); }  // waits for the transfer before host_ goes
  status wait(std::chrono::milliseconds timeout) override { return inner_->wait(timeout); }
  bool test() override { return inner_->test(); }

private:
  payload_buffer host_;
  std::unique_ptr<request> inner_;
};

// A request refused before it started.
class failed_request final : public request {
public:
  explicit failed_request(error e) : error_(std::move(e)) {}
  status wait(std::chrono::milliseconds) override { return error_; }
  bool test() override { return true; }

private:
  error error_;
};

}  // namespace sailor::comm::cuda_detail
