// The device channel (sailor/comm/device_channel.hpp): device buffers staged through pinned
// host memory over a host channel.

#include <sailor/comm/device_channel.hpp>

#include <sailor/comm/cuda.hpp>

#include <mutex>

#include "staged_requests.hpp"

namespace sailor::comm {
namespace {

using cuda_detail::failed_request;
using cuda_detail::staged_recv;
using cuda_detail::staged_send;

class device_channel final : public channel {
public:
  device_channel(std::unique_ptr<channel> inner, std::unique_ptr<cuda_stream> stream)
      : inner_(std::move(inner)), stream_(std::move(stream)) {}

  int rank() const override { return inner_->rank(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  std::string backend() const override {
    return "cuda:" + std::to_string(stream_->device()) + " staged(" + inner_->backend() + ")";
  }
  std::uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::uint64_t bytes_received() const override { return inner_->bytes_received(); }
  void abort(const std::string& why) override { inner_->abort(why); }

  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    if (auto st = check(buf, "isend")) return std::make_unique<failed_request>(*st);
    auto host = staging_.take(buf.bytes());
    if (!host) return std::make_unique<failed_request>(host.error());
    {
      // Any thread may post: the stream's work is issued by one at a time.
      std::lock_guard<std::mutex> lock(stream_mutex_);
      status st = stream_->order_after_default_stream();
      if (!st) st = stream_->copy_async(host->data(), buf.data, buf.bytes());
      if (!st) st = stream_->synchronize(inner_->timeout());
      if (st) return std::make_unique<failed_request>(*st);
    }
    auto inner = inner_->isend({host->data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_send>(std::move(*host), std::move(inner));
  }

  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    if (auto st = check(buf, "irecv")) return std::make_unique<failed_request>(*st);
    auto host = staging_.take(buf.bytes());
    if (!host) return std::make_unique<failed_request>(host.error());
    auto inner = inner_->irecv({host->data(), buf.bytes(), element_type::u8}, peer, tag);
    return std::make_unique<staged_recv>(std::move(*host), std::move(inner), buf.data, stream_->device());
  }

private:
  status check(buffer_view buf, const char* op) const {
    if (!buf.data && buf.count > 0)
      return error::invalid_input("", backend() + " " + op + ": null buffer of " + std::to_string(buf.count) +
                                          " elements");
    return {};
  }

  std::unique_ptr<channel> inner_;
  std::unique_ptr<cuda_stream> stream_;
  std::mutex stream_mutex_;
  pinned_pool staging_;
};

}  // namespace

result<std::unique_ptr<channel>> make_device_channel(std::unique_ptr<channel> inner, int device) {
  if (!inner) return error::invalid_input("", "device channel: no inner channel");
  auto stream = cuda_stream::create(device);
  if (!stream) return stream.error();
  return std::unique_ptr<channel>(std::make_unique<device_channel>(std::move(inner), std::move(*stream)));
}

}  // namespace sailor::comm
