// A channel over a communicator's own point-to-point operations (Gloo's TCP pairs, NCCL's
// send/recv): the data plane before the transport channel, kept for benches and tools.
#include "sailor/comm/channel.hpp"

#include <atomic>

namespace sailor::comm {
namespace {

class communicator_channel final : public channel {
public:
  explicit communicator_channel(communicator& world) : world_(world) {}
  int rank() const override { return world_.rank(); }
  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    sent_ += buf.bytes();
    return world_.isend(buf, peer, tag);
  }
  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    received_ += buf.bytes();
    return world_.irecv(buf, peer, tag);
  }
  std::chrono::milliseconds timeout() const override { return world_.timeout(); }
  std::string backend() const override { return "pairs of " + world_.name(); }
  std::uint64_t bytes_sent() const override { return sent_; }
  std::uint64_t bytes_received() const override { return received_; }
  // The transfers are the communicator's own: aborting them is aborting it.
  void abort(const std::string& why) override { world_.abort(why); }

private:
  communicator& world_;
  std::atomic<std::uint64_t> sent_{0}, received_{0};
};

}  // namespace

std::unique_ptr<channel> make_communicator_channel(communicator& world) {
  return std::make_unique<communicator_channel>(world);
}

}  // namespace sailor::comm
