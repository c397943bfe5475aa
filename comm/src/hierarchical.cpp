// The hierarchical all-reduce (see hierarchical.hpp): zone all-reduce, rings of shards across
// zones over the channel, shards back inside each zone.
#include "sailor/comm/hierarchical.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>

namespace sailor::comm {

std::vector<std::string> zone_layout::zone_names() const {
  std::set<std::string> names(zones.begin(), zones.end());
  return {names.begin(), names.end()};
}

std::vector<int> zone_layout::members_of(const std::string& zone) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (zones[i] == zone) out.push_back(members[i]);
  return out;
}

int zone_layout::min_zone_size() const {
  int smallest = static_cast<int>(members.size());
  for (const auto& z : zone_names())
    smallest = std::min(smallest, static_cast<int>(members_of(z).size()));
  return smallest;
}

namespace {

// Where a member sits: its zone's position in name order and its position in its zone.
struct position {
  int zone = -1, local = -1;
};

position position_of(const zone_layout& layout, int global_rank) {
  auto names = layout.zone_names();
  for (int z = 0; z < static_cast<int>(names.size()); ++z) {
    auto in_zone = layout.members_of(names[z]);
    auto it = std::find(in_zone.begin(), in_zone.end(), global_rank);
    if (it != in_zone.end()) return {z, static_cast<int>(it - in_zone.begin())};
  }
  return {};
}

// Element-wise `into op= from` for the types the runtime reduces.
template <class T>
void combine(T* into, const T* from, std::size_t n, reduce_op op) {
  if (op == reduce_op::sum)
    for (std::size_t i = 0; i < n; ++i) into[i] += from[i];
  else
    for (std::size_t i = 0; i < n; ++i) into[i] = std::max(into[i], from[i]);
}

status combine(buffer_view into, const void* from, reduce_op op) {
  switch (into.type) {
    case element_type::f32: combine(static_cast<float*>(into.data), static_cast<const float*>(from), into.count, op); return {};
    case element_type::f64: combine(static_cast<double*>(into.data), static_cast<const double*>(from), into.count, op); return {};
    case element_type::i32: combine(static_cast<std::int32_t*>(into.data), static_cast<const std::int32_t*>(from), into.count, op); return {};
    case element_type::i64: combine(static_cast<std::int64_t*>(into.data), static_cast<const std::int64_t*>(from), into.count, op); return {};
    default: return error::unimplemented("hierarchical all-reduce: f32, f64, i32 and i64 only");
  }
}

buffer_view slice(buffer_view b, std::size_t begin, std::size_t count) {
  return {static_cast<char*>(b.data) + begin * size_of(b.type), count, b.type};
}

class hierarchical_communicator final : public communicator {
public:
  hierarchical_communicator(std::string name, zone_layout layout, int global_rank,
                            std::unique_ptr<communicator> zone_group, channel& cross,
                            std::uint32_t tag_space)
      : name_(std::move(name)), layout_(std::move(layout)), zone_group_(std::move(zone_group)),
        cross_(cross), tag_space_(tag_space) {
    rank_ = static_cast<int>(std::find(layout_.members.begin(), layout_.members.end(), global_rank) -
                             layout_.members.begin());
    me_ = position_of(layout_, global_rank);
    auto names = layout_.zone_names();
    for (const auto& z : names) zone_members_.push_back(layout_.members_of(z));
    equal_zones_ = std::all_of(zone_members_.begin(), zone_members_.end(), [&](const auto& m) {
      return m.size() == zone_members_.front().size();
    });
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(layout_.members.size()); }
  const std::string& name() const override { return name_; }
  std::chrono::milliseconds timeout() const override { return cross_.timeout(); }

  // The zone group and the channel fail what is in flight on them; the flag fails what
  // comes later before it reaches either.
  void abort(const std::string& why) override {
    {
      std::lock_guard lock{abort_mutex_};
      if (aborted_) return;
      why_ = why;
      aborted_ = true;
    }
    if (zone_group_) zone_group_->abort(why);
    cross_.abort(why);
  }

  status all_reduce(buffer_view buf, reduce_op op) override {
    if (aborted_) return aborted_error();
    ++calls_;
    const std::size_t shards = std::min<std::size_t>(layout_.min_zone_size(), buf.count);
    if (shards == 0) return {};
    // Phase 1: where every zone has exactly `shards` members, a reduce-scatter leaves each
    // member its own shard reduced over the zone (what phase 2 needs, a ring's bytes); else the
    // whole buffer is all-reduced in the zone.
    if (zone_group_) {
      const bool scatter = equal_zones_ && zone_members_[me_.zone].size() == shards;
      if (auto st = scatter ? reduce_scatter_in_zone(buf, shards, op) : zone_group_->all_reduce(buf, op))
        return st;
    }
    auto bounds = [&](std::size_t j) { return std::pair{j * buf.count / shards, (j + 1) * buf.count / shards}; };
    if (static_cast<std::size_t>(me_.local) < shards) {
      auto [lo, hi] = bounds(static_cast<std::size_t>(me_.local));
      if (auto st = ring_across_zones(slice(buf, lo, hi - lo), op)) return st;
    }
    if (!zone_group_) return {};
    return spread_shards(buf, shards);
  }

  status broadcast(buffer_view buf, int root) override {
    if (rank_ != root) std::memset(buf.data, 0, buf.bytes());
    return all_reduce(buf, reduce_op::sum);
  }
  status all_gather(buffer_view in, buffer_view out) override {
    if (aborted_) return aborted_error();
    if (out.bytes() != in.bytes() * static_cast<std::size_t>(size()))
      return error::invalid_input("", "[comm " + name_ + "] all_gather: output must hold size() inputs");
    if (!zone_group_ && zone_members_.size() == layout_.members.size()) {
      ++calls_;
      return gather_across_zones(in, out);
    }
    std::memset(out.data, 0, out.bytes());
    std::memcpy(static_cast<char*>(out.data) + static_cast<std::size_t>(rank_) * in.bytes(), in.data, in.bytes());
    return all_reduce(out, reduce_op::sum);
  }
  status barrier() override {
    std::int32_t one = 1;
    return all_reduce({&one, 1, element_type::i32}, reduce_op::sum);
  }
  std::unique_ptr<request> isend(buffer_view, int, std::uint64_t) override { return refused(); }
  std::unique_ptr<request> irecv(buffer_view, int, std::uint64_t) override { return refused(); }

private:
  error aborted_error() {
    std::lock_guard lock{abort_mutex_};
    return error::disconnected("[comm " + name_ + "] aborted: " + why_);
  }
  std::unique_ptr<request> refused();
  status ring_across_zones(buffer_view shard, reduce_op op);
  status gather_across_zones(buffer_view in, buffer_view out);
  status reduce_scatter_in_zone(buffer_view buf, std::size_t shards, reduce_op op);
  status spread_shards(buffer_view buf, std::size_t shards);
  std::uint64_t tag_of(int step) const {
    return (std::uint64_t{1} << 62) | (std::uint64_t{tag_space_ & 0xffff} << 44) |
           ((calls_ & 0xfffffff) << 16) | static_cast<std::uint64_t>(step);
  }

  std::string name_;
  zone_layout layout_;
  std::unique_ptr<communicator> zone_group_;
  channel& cross_;
  std::uint32_t tag_space_;
  int rank_ = 0;
  position me_;
  std::vector<std::vector<int>> zone_members_;  // per zone (name order), global ranks
  bool equal_zones_ = true;
  std::uint64_t calls_ = 0;
  std::vector<char> incoming_;
  std::mutex abort_mutex_;
  std::atomic<bool> aborted_{false};
  std::string why_;
};

class refused_request final : public request {
public:
  status wait(std::chrono::milliseconds) override {
    return error::unimplemented("a hierarchical group has no point to point: it goes over the channel");
  }
  bool test() override { return true; }
};

std::unique_ptr<request> hierarchical_communicator::refused() {
  return std::make_unique<refused_request>();
}

// Phase 2: a ring over the zones of the j-th members (j = this member's place in its zone).
status hierarchical_communicator::ring_across_zones(buffer_view shard, reduce_op op) {
  const int k = static_cast<int>(zone_members_.size());
  if (k < 2) return {};
  const int next = zone_members_[(me_.zone + 1) % k][me_.local];
  const int prev = zone_members_[(me_.zone + k - 1) % k][me_.local];
  auto chunk = [&](int c) {
    c = ((c % k) + k) % k;
    return slice(shard, shard.count * c / k, shard.count * (c + 1) / k - shard.count * c / k);
  };
  auto exchange = [&](int step, buffer_view out, buffer_view in) -> status {
    auto r = cross_.irecv(in, prev, tag_of(step));
    auto s = cross_.isend(out, next, tag_of(step));
    if (auto st = r->wait(cross_.timeout())) return st;
    return s->wait(cross_.timeout());
  };
  const int i = me_.zone;
  for (int step = 0; step < k - 1; ++step) {  // reduce-scatter
    buffer_view target = chunk(i - step - 1);
    incoming_.resize(target.bytes());
    buffer_view in{incoming_.data(), target.count, target.type};
    if (auto st = exchange(step, chunk(i - step), in)) return st;
    if (auto st = combine(target, incoming_.data(), op)) return st;
  }
  for (int step = 0; step < k - 1; ++step)  // all-gather: chunk i+1 is complete here
    if (auto st = exchange(k - 1 + step, chunk(i + 1 - step), chunk(i - step))) return st;
  return {};
}

// An all-gather where every zone holds one member: a ring over the zones, each step passing on
// the block received in the one before (k-1 steps of one input each, whatever the type).
status hierarchical_communicator::gather_across_zones(buffer_view in, buffer_view out) {
  const int k = static_cast<int>(zone_members_.size());
  auto block = [&](int zone) {
    zone = ((zone % k) + k) % k;
    const auto at = std::find(layout_.members.begin(), layout_.members.end(), zone_members_[zone][0]) -
                    layout_.members.begin();
    return slice(out, static_cast<std::size_t>(at) * in.count, in.count);
  };
  std::memcpy(block(me_.zone).data, in.data, in.bytes());
  const int next = zone_members_[(me_.zone + 1) % k][0], prev = zone_members_[(me_.zone + k - 1) % k][0];
  for (int step = 0; step < k - 1; ++step) {
    auto r = cross_.irecv(block(me_.zone - step - 1), prev, tag_of(step));
    auto s = cross_.isend(block(me_.zone - step), next, tag_of(step));
    if (auto st = r->wait(cross_.timeout())) return st;
    if (auto st = s->wait(cross_.timeout())) return st;
  }
  return {};
}

// Phase 1 with equal zones: a ring reduce-scatter over the zone group's point to point, on the
// shard bounds of phase 2; member j ends with shard j reduced over its zone.
status hierarchical_communicator::reduce_scatter_in_zone(buffer_view buf, std::size_t shards,
                                                         reduce_op op) {
  const int g = static_cast<int>(shards), me = me_.local;
  auto chunk = [&](int c) {
    const auto j = static_cast<std::size_t>(((c % g) + g) % g);
    const std::size_t lo = j * buf.count / shards, hi = (j + 1) * buf.count / shards;
    return slice(buf, lo, hi - lo);
  };
  const int next = (me + 1) % g, prev = (me + g - 1) % g;
  for (int step = 0; step < g - 1; ++step) {
    buffer_view target = chunk(me - step - 2);
    incoming_.resize(target.bytes());
    buffer_view in{incoming_.data(), target.count, target.type};
    const std::uint64_t tag = ((calls_ & 0xffffffff) << 16) | static_cast<std::uint64_t>(step);
    auto r = zone_group_->irecv(in, prev, tag);
    auto s = zone_group_->isend(chunk(me - step - 1), next, tag);
    if (auto st = r->wait(zone_group_->timeout())) return st;
    if (auto st = s->wait(zone_group_->timeout())) return st;
    if (auto st = combine(target, incoming_.data(), op)) return st;
  }
  return {};
}

// Phase 3: every member of the zone gets every shard.
status hierarchical_communicator::spread_shards(buffer_view buf, std::size_t shards) {
  auto bounds = [&](std::size_t j) { return std::pair{j * buf.count / shards, (j + 1) * buf.count / shards}; };
  const std::size_t zone_size = zone_members_[me_.zone].size();
  if (equal_zones_ && zone_size == shards) {
    // One all-gather of equal pieces (the largest shard's size; the tail padded).
    const std::size_t piece = (buf.count + shards - 1) / shards, el = size_of(buf.type);
    std::vector<char> in(piece * el, 0), out(piece * shards * el);
    auto [lo, hi] = bounds(static_cast<std::size_t>(me_.local));
    std::memcpy(in.data(), static_cast<char*>(buf.data) + lo * el, (hi - lo) * el);
    if (auto st = zone_group_->all_gather({in.data(), piece, buf.type}, {out.data(), piece * shards, buf.type}))
      return st;
    for (std::size_t j = 0; j < shards; ++j) {
      auto [a, b] = bounds(j);
      std::memcpy(static_cast<char*>(buf.data) + a * el, out.data() + j * piece * el, (b - a) * el);
    }
    return {};
  }
  for (std::size_t j = 0; j < shards; ++j) {
    auto [lo, hi] = bounds(j);
    if (auto st = zone_group_->broadcast(slice(buf, lo, hi - lo), static_cast<int>(j))) return st;
  }
  return {};
}

}  // namespace

std::vector<int> hierarchical_peers(const zone_layout& layout, int global_rank) {
  auto me = position_of(layout, global_rank);
  auto names = layout.zone_names();
  const int k = static_cast<int>(names.size());
  if (me.zone < 0 || k < 2 || me.local >= layout.min_zone_size()) return {};
  std::set<int> peers{layout.members_of(names[(me.zone + 1) % k])[me.local],
                      layout.members_of(names[(me.zone + k - 1) % k])[me.local]};
  return {peers.begin(), peers.end()};
}

std::unique_ptr<communicator> make_hierarchical(std::string name, zone_layout layout,
                                                int global_rank,
                                                std::unique_ptr<communicator> zone_group,
                                                channel& cross, std::uint32_t tag_space) {
  return std::make_unique<hierarchical_communicator>(std::move(name), std::move(layout), global_rank,
                                                     std::move(zone_group), cross, tag_space);
}

}  // namespace sailor::comm
