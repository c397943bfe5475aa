#include <sailor/actors/train/shaped_p2p.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

#include <sailor/comm/shaping.hpp>

namespace sailor::train {
namespace {

using clock_type = std::chrono::steady_clock;

// Headers use a tag bit the executor's tags never reach (Gloo keeps 56 bits of a tag).
constexpr std::uint64_t header_bit = std::uint64_t{1} << 55;

double now_s() {
  return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
}

clock_type::time_point at(double seconds) {
  return clock_type::time_point(
      std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds)));
}

// A shaped send or receive: the header (the release time) and the payload, both in flight. A
// receive is done only once the header's release time has passed as well.
class shaped_request final : public comm::request {
public:
  enum class side { send, receive };
  shaped_request(side s, std::unique_ptr<double> header, std::unique_ptr<comm::request> header_req,
                 std::unique_ptr<comm::request> payload_req)
      : side_(s), header_(std::move(header)), header_req_(std::move(header_req)),
        payload_req_(std::move(payload_req)) {}
  status wait(std::chrono::milliseconds timeout) override {
    auto deadline = clock_type::now() + timeout;
    if (auto st = header_req_->wait(timeout)) return st;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (auto st = payload_req_->wait(std::max(left, std::chrono::milliseconds{0}))) return st;
    if (side_ == side::send) return {};
    const auto release = at(*header_);
    if (release > deadline)
      return comm::make_error(error_kind::disconnected,
                              "shaped receive: the link releases the message after the timeout");
    std::this_thread::sleep_until(release);  // the emulated link's latency and serialization
    return {};
  }
  bool test() override {
    return header_req_->test() && payload_req_->test() &&
           (side_ == side::send || clock_type::now() >= at(*header_));
  }

private:
  side side_;
  std::unique_ptr<double> header_;  // written or read by the header request until it is done
  std::unique_ptr<comm::request> header_req_, payload_req_;
};

class shaped_communicator final : public comm::communicator {
public:
  shaped_communicator(std::unique_ptr<comm::communicator> inner,
                      std::vector<std::optional<config::zone_link>> link_to)
      : inner_(std::move(inner)), link_to_(std::move(link_to)), link_free_(link_to_.size(), 0.0) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  status all_reduce(comm::buffer_view buf, comm::reduce_op op) override {
    return inner_->all_reduce(buf, op);
  }
  status broadcast(comm::buffer_view buf, int root) override { return inner_->broadcast(buf, root); }
  status all_gather(comm::buffer_view in, comm::buffer_view out) override {
    return inner_->all_gather(in, out);
  }
  status barrier() override { return inner_->barrier(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }

  std::unique_ptr<comm::request> isend(comm::buffer_view buf, int peer, std::uint64_t tag) override {
    if (!shaped(peer)) return inner_->isend(buf, peer, tag);
    auto step = comm::shape_step(*link_to_[peer], now_s(), link_free_[peer],
                                 static_cast<double>(buf.bytes()));
    link_free_[peer] = step.link_free_s;
    auto header = std::make_unique<double>(step.release_s);
    auto header_req = inner_->isend({header.get(), 1, comm::element_type::f64}, peer, tag | header_bit);
    auto payload_req = inner_->isend(buf, peer, tag);
    return std::make_unique<shaped_request>(shaped_request::side::send, std::move(header),
                                            std::move(header_req), std::move(payload_req));
  }
  std::unique_ptr<comm::request> irecv(comm::buffer_view buf, int peer, std::uint64_t tag) override {
    if (!shaped(peer)) return inner_->irecv(buf, peer, tag);
    auto header = std::make_unique<double>(0.0);
    auto header_req = inner_->irecv({header.get(), 1, comm::element_type::f64}, peer, tag | header_bit);
    auto payload_req = inner_->irecv(buf, peer, tag);
    return std::make_unique<shaped_request>(shaped_request::side::receive, std::move(header),
                                            std::move(header_req), std::move(payload_req));
  }

private:
  bool shaped(int peer) const {
    return peer >= 0 && peer < static_cast<int>(link_to_.size()) && link_to_[peer].has_value();
  }

  std::unique_ptr<comm::communicator> inner_;
  std::vector<std::optional<config::zone_link>> link_to_;
  std::vector<double> link_free_;  // per peer: when its link is free again (steady seconds)
};

}  // namespace

std::unique_ptr<comm::communicator> make_shaped_p2p(
    std::unique_ptr<comm::communicator> inner,
    std::vector<std::optional<config::zone_link>> link_to) {
  return std::make_unique<shaped_communicator>(std::move(inner), std::move(link_to));
}

std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == b) return std::nullopt;
  for (const auto& l : links)
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l;
  return std::nullopt;
}

}  // namespace sailor::train
