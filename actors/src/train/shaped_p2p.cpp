#include <sailor/actors/train/shaped_p2p.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
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

// The link figures a zone-ordered ring over a group's members crosses (shaped_all_reduce_s).
struct group_links {
  int members = 0, zones = 0, smallest_zone = 0;
  double latency_s = 0;
  std::vector<config::zone_link> crossed;  // empty: nothing to shape
};

group_links links_of_group(const std::vector<std::string>& zone_of,
                           const std::vector<config::zone_link>& links) {
  group_links g;
  g.members = static_cast<int>(zone_of.size());
  std::map<std::string, int> count;
  for (const auto& z : zone_of) ++count[z];
  g.zones = static_cast<int>(count.size());
  g.smallest_zone = g.members;
  for (const auto& [z, c] : count) g.smallest_zone = std::min(g.smallest_zone, c);
  if (g.zones < 2) return g;
  // The ring visits the zones in name order and closes from the last back to the first.
  std::vector<std::string> order;
  for (const auto& [z, c] : count) order.push_back(z);
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto l = find_link(links, order[i], order[(i + 1) % order.size()]);
    if (l) g.crossed.push_back(*l);
  }
  for (const auto& l : g.crossed) g.latency_s = std::max(g.latency_s, l.latency_s);
  return g;
}

double all_reduce_s(const group_links& g, double bytes) {
  if (g.crossed.empty() || g.members < 2 || bytes < 0) return 0;
  const int n = g.members, z = g.zones;
  // Bandwidth of the slowest crossed link for the messages each scheme sends.
  auto slowest_bytes_per_s = [&](double message) {
    double bw = std::numeric_limits<double>::infinity();
    for (const auto& l : g.crossed) {
      const double b = l.bytes_per_s(message);
      if (b > 0) bw = std::min(bw, b);
    }
    return bw;
  };
  const double ring_message = bytes / n;
  const double ring = 2.0 * (n - 1) * (g.latency_s + ring_message / slowest_bytes_per_s(ring_message));
  const double hier_message = bytes / (static_cast<double>(g.smallest_zone) * z);
  const double hier = 2.0 * (z - 1) * (g.latency_s + hier_message / slowest_bytes_per_s(hier_message));
  return std::min(ring, hier);
}

// Arrival times travel in the reduced buffer as three base-2^20 digits of microseconds per
// member (each exact in fp32; every other member adds zero, or takes the max with zero).
constexpr int arrival_digits = 3;
constexpr double digit_base = 1 << 20;

template <class T>
void write_arrival(T* slots, double arrival_s) {
  auto us = static_cast<std::uint64_t>(std::max(0.0, arrival_s) * 1e6);
  for (int d = 0; d < arrival_digits; ++d) {
    slots[d] = static_cast<T>(us % (1u << 20));
    us >>= 20;
  }
}

template <class T>
double read_arrival(const T* slots) {
  double us = 0;
  for (int d = arrival_digits - 1; d >= 0; --d) us = us * digit_base + static_cast<double>(slots[d]);
  return us * 1e-6;
}

class shaped_communicator final : public comm::communicator {
public:
  shaped_communicator(std::unique_ptr<comm::communicator> inner,
                      std::vector<std::optional<config::zone_link>> link_to, group_links group = {})
      : inner_(std::move(inner)), link_to_(std::move(link_to)), link_free_(link_to_.size(), 0.0),
        group_(std::move(group)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  status all_reduce(comm::buffer_view buf, comm::reduce_op op) override {
    if (group_.crossed.empty()) return inner_->all_reduce(buf, op);
    const double arrival = now_s();
    double last_arrival = arrival;
    if (buf.type == comm::element_type::f32) {
      if (auto st = reduce_with_arrival<float>(buf, op, arrival, last_arrival)) return st;
    } else if (buf.type == comm::element_type::f64) {
      if (auto st = reduce_with_arrival<double>(buf, op, arrival, last_arrival)) return st;
    } else {
      // Other element types: the arrivals in a second, small all-reduce.
      if (auto st = inner_->all_reduce(buf, op)) return st;
      if (auto st = inner_->all_reduce({&last_arrival, 1, comm::element_type::f64}, comm::reduce_op::max))
        return st;
    }
    const double release = last_arrival + all_reduce_s(group_, static_cast<double>(buf.bytes()));
    if (release - arrival > std::chrono::duration<double>(inner_->timeout()).count())
      return comm::make_error(error_kind::disconnected,
                              "shaped all-reduce: the links release it after the timeout");
    std::this_thread::sleep_until(at(release));  // the emulated links' latency and bandwidth
    return {};
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
  // All-reduces `buf` with each member's arrival time appended; `last_arrival`: the latest.
  template <class T>
  status reduce_with_arrival(comm::buffer_view buf, comm::reduce_op op, double arrival,
                             double& last_arrival) {
    const std::size_t n = static_cast<std::size_t>(size());
    const std::size_t count = buf.count + arrival_digits * n;
    scratch_.resize(count * sizeof(T));
    T* data = reinterpret_cast<T*>(scratch_.data());
    std::memcpy(data, buf.data, buf.bytes());
    std::fill(data + buf.count, data + count, T{0});
    write_arrival(data + buf.count + arrival_digits * static_cast<std::size_t>(rank()), arrival);
    if (auto st = inner_->all_reduce({data, count, buf.type}, op)) return st;
    std::memcpy(buf.data, data, buf.bytes());
    for (std::size_t r = 0; r < n; ++r)
      last_arrival = std::max(last_arrival, read_arrival(data + buf.count + arrival_digits * r));
    return {};
  }

  bool shaped(int peer) const {
    return peer >= 0 && peer < static_cast<int>(link_to_.size()) && link_to_[peer].has_value();
  }

  std::unique_ptr<comm::communicator> inner_;
  std::vector<std::optional<config::zone_link>> link_to_;
  std::vector<double> link_free_;  // per peer: when its link is free again (steady seconds)
  group_links group_;              // what an all-reduce crosses (nothing: not shaped)
  std::vector<char> scratch_;      // the buffer with the arrival times appended
};

}  // namespace

std::unique_ptr<comm::communicator> make_shaped_p2p(
    std::unique_ptr<comm::communicator> inner,
    std::vector<std::optional<config::zone_link>> link_to) {
  return std::make_unique<shaped_communicator>(std::move(inner), std::move(link_to));
}

std::unique_ptr<comm::communicator> make_shaped_group(std::unique_ptr<comm::communicator> inner,
                                                      std::vector<std::string> zone_of,
                                                      std::vector<config::zone_link> links) {
  const int me = inner->rank();
  std::vector<std::optional<config::zone_link>> link_to(zone_of.size());
  if (me >= 0 && me < static_cast<int>(zone_of.size()))
    for (std::size_t r = 0; r < zone_of.size(); ++r) link_to[r] = find_link(links, zone_of[me], zone_of[r]);
  auto group = links_of_group(zone_of, links);
  return std::make_unique<shaped_communicator>(std::move(inner), std::move(link_to), std::move(group));
}

double shaped_all_reduce_s(const std::vector<std::string>& zone_of,
                           const std::vector<config::zone_link>& links, double bytes) {
  return all_reduce_s(links_of_group(zone_of, links), bytes);
}

std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == b) return std::nullopt;
  for (const auto& l : links)
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l;
  return std::nullopt;
}

}  // namespace sailor::train
