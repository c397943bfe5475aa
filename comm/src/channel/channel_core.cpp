#include "channel_core.hpp"

#include <algorithm>
#include <cstring>

namespace sailor::comm::channel_detail {
namespace {

dtype dtype_of(element_type t) {
  switch (t) {
    case element_type::f32: return dtype::f32;
    case element_type::f64: return dtype::f64;
    case element_type::f16: return dtype::f16;
    case element_type::bf16: return dtype::bf16;
    case element_type::i32: return dtype::i32;
    case element_type::i64: return dtype::i64;
    case element_type::u8: return dtype::u8;
  }
  return dtype::u8;
}

status error_of(const transport_error& e) { return e.to_error(); }

}  // namespace

int channel_core::peer_of_name(const std::string& transport_name) const {
  const std::string prefix = name_ + "/rank-";
  if (transport_name.size() <= prefix.size() || transport_name.compare(0, prefix.size(), prefix))
    return -1;
  const std::string digits = transport_name.substr(prefix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  int r = std::stoi(digits);
  return peers_.count(r) ? r : -1;
}

std::string channel_core::who(int peer) const {
  return "[channel " + name_ + " rank " + std::to_string(rank_) + " <-> rank " +
         std::to_string(peer) + "]";
}

connection_handlers channel_core::handlers_for(int peer) {
  connection_handlers h;
  std::weak_ptr<channel_core> weak = weak_from_this();
  h.allocate = [weak, peer](const tensor_descriptor& desc) {
    auto self = weak.lock();
    return self ? self->allocate(peer, desc) : payload_buffer::allocate(desc.bytes);
  };
  h.on_tensor = [weak, peer](tensor_descriptor desc, payload_buffer payload) {
    if (auto self = weak.lock()) self->deliver(peer, desc, std::move(payload));
  };
  h.on_error = [weak, peer](const transport_error& err) {
    if (auto self = weak.lock()) self->fail_peer(peer, err);
  };
  h.on_control = [weak, peer](std::vector<std::byte> bytes) {
    if (auto self = weak.lock()) self->on_mark(peer, bytes);
  };
  return h;
}

void channel_core::attach(int peer, connection_ptr conn, bool open) {
  std::lock_guard lock{mu_};
  connections_[peer] = std::move(conn);
  if (open) open_.insert(peer);
  connected_.notify_all();
}

void channel_core::mark_open(int peer) {
  std::lock_guard lock{mu_};
  open_.insert(peer);
  connected_.notify_all();
}

std::set<int> channel_core::wait_connected(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock{mu_};
  connected_.wait_until(lock, deadline,
                        [this] { return open_.size() == peers_.size() || !failed_.empty(); });
  std::set<int> missing;
  for (int p : peers_)
    if (!open_.count(p)) missing.insert(p);
  return missing;
}

std::optional<transport_error> channel_core::failure_of(int peer) const {
  std::lock_guard lock{mu_};
  auto f = failed_.find(peer);
  if (f == failed_.end()) return std::nullopt;
  return f->second;
}

std::unique_ptr<request> channel_core::isend(buffer_view buf, int peer, std::uint64_t tag) {
  connection_ptr conn;
  {
    std::lock_guard lock{mu_};
    if (!peers_.count(peer))
      return completed_request(error::invalid_input("", who(peer) + " send: not a peer of this channel"));
    if (closed_) return completed_request(error::disconnected(who(peer) + " " + closed_why_));
    if (auto f = failed_.find(peer); f != failed_.end()) return completed_request(error_of(f->second));
    conn = connections_.at(peer);
  }
  auto state = std::make_shared<request_state>();
  tensor_descriptor desc;
  desc.type = dtype_of(buf.type);
  desc.shape = {static_cast<std::int64_t>(buf.count)};
  desc.tag = tag;
  const std::size_t bytes = buf.bytes();
  std::weak_ptr<channel_core> weak = weak_from_this();
  conn->send_tensor(std::move(desc), {static_cast<const std::byte*>(buf.data), bytes},
                    [state, weak, bytes](const op_status& s) {
                      if (!s) {
                        if (auto self = weak.lock()) self->bytes_sent += bytes;
                        state->complete({});
                      } else {
                        state->complete(error_of(*s));
                      }
                    });
  return std::make_unique<state_request>(
      state, who(peer) + " send of tag " + std::to_string(tag), timeout_);
}

std::unique_ptr<request> channel_core::irecv(buffer_view buf, int peer, std::uint64_t tag) {
  const key k{peer, tag};
  std::unique_lock lock{mu_};
  if (!peers_.count(peer))
    return completed_request(error::invalid_input("", who(peer) + " receive: not a peer of this channel"));
  if (auto a = arrived_.find(k); a != arrived_.end() && !a->second.empty()) {
    payload_buffer payload = std::move(a->second.front());
    a->second.pop_front();
    if (a->second.empty()) arrived_.erase(a);
    lock.unlock();
    if (payload.size() != buf.bytes())
      return completed_request(error::invalid_input("", who(peer) + " tag " + std::to_string(tag) + ": " +
                                         std::to_string(payload.size()) + " bytes arrived, " +
                                         std::to_string(buf.bytes()) + " expected"));
    std::memcpy(buf.data, payload.data(), payload.size());
    return completed_request({});
  }
  if (closed_) return completed_request(error::disconnected(who(peer) + " " + closed_why_));
  if (auto f = failed_.find(peer); f != failed_.end()) return completed_request(error_of(f->second));
  auto state = std::make_shared<request_state>();
  posted_[k].push_back({buf, state, false});
  std::weak_ptr<channel_core> weak = weak_from_this();
  auto withdraw_it = [weak, k, state] {
    auto self = weak.lock();
    return !self || self->withdraw(k, state);
  };
  return std::make_unique<state_request>(
      state, who(peer) + " receive of tag " + std::to_string(tag), timeout_, withdraw_it);
}

bool channel_core::withdraw(const key& k, const std::shared_ptr<request_state>& state) {
  std::lock_guard lock{mu_};
  auto p = posted_.find(k);
  if (p == posted_.end()) return true;
  auto& q = p->second;
  auto e = std::find_if(q.begin(), q.end(), [&](const posted_receive& r) { return r.state == state; });
  if (e == q.end()) return true;
  if (e->landing) return false;
  q.erase(e);
  if (q.empty()) posted_.erase(p);
  return true;
}

// On the progress thread: land the payload in the buffer of the first receive posted for it
// that is not landing already, when the sizes agree; elsewhere on the heap.
payload_buffer channel_core::allocate(int peer, const tensor_descriptor& desc) {
  std::lock_guard lock{mu_};
  auto p = posted_.find({peer, desc.tag});
  if (p != posted_.end())
    for (auto& r : p->second) {
      if (r.landing) continue;
      if (r.buf.bytes() != desc.bytes) break;
      r.landing = true;
      return payload_buffer{static_cast<std::byte*>(r.buf.data), desc.bytes, nullptr};
    }
  return payload_buffer::allocate(desc.bytes);
}

void channel_core::deliver(int peer, const tensor_descriptor& desc, payload_buffer payload) {
  bytes_received += payload.size();
  std::shared_ptr<request_state> done;
  status outcome;
  {
    std::lock_guard lock{mu_};
    const key k{peer, desc.tag};
    auto p = posted_.find(k);
    if (p == posted_.end()) {
      arrived_[k].push_back(std::move(payload));
      return;
    }
    auto& q = p->second;
    auto landed = std::find_if(q.begin(), q.end(), [&](const posted_receive& r) {
      return r.landing && r.buf.data == payload.data();
    });
    if (landed == q.end()) {
      // Arrived on the heap: the first receive not landing takes it.
      landed = std::find_if(q.begin(), q.end(), [](const posted_receive& r) { return !r.landing; });
      if (landed == q.end()) {
        arrived_[k].push_back(std::move(payload));
        return;
      }
      if (landed->buf.bytes() != payload.size())
        outcome = error::invalid_input("", who(peer) + " tag " + std::to_string(desc.tag) + ": " +
                                 std::to_string(payload.size()) + " bytes arrived, " +
                                 std::to_string(landed->buf.bytes()) + " expected");
      else
        std::memcpy(landed->buf.data, payload.data(), payload.size());
    }
    done = landed->state;
    q.erase(landed);
    if (q.empty()) posted_.erase(p);
  }
  done->complete(std::move(outcome));
}

void channel_core::fail_peer(int peer, const transport_error& err) {
  std::vector<std::shared_ptr<request_state>> pending;
  transport_error named{err.code, who(peer) + ": " + err.message};
  {
    std::lock_guard lock{mu_};
    failed_.emplace(peer, named);
    for (auto p = posted_.begin(); p != posted_.end();) {
      if (p->first.first != peer) {
        ++p;
        continue;
      }
      for (auto& r : p->second) pending.push_back(r.state);
      p = posted_.erase(p);
    }
    connected_.notify_all();
  }
  for (auto& s : pending) s->complete(error_of(named));
}

namespace {
// The only control messages of a channel: the flush mark and its answer.
constexpr std::byte flush_mark{'F'}, flush_answer{'A'};
}  // namespace

void channel_core::on_mark(int peer, const std::vector<std::byte>& bytes) {
  connection_ptr conn;
  {
    std::lock_guard lock{mu_};
    if (bytes.size() == 1 && bytes[0] == flush_answer) {
      flushed_.insert(peer);
      connected_.notify_all();
      return;
    }
    if (auto c = connections_.find(peer); c != connections_.end()) conn = c->second;
  }
  if (bytes.size() == 1 && bytes[0] == flush_mark) {
    if (conn) conn->send_control({flush_answer}, {});
    return;
  }
  // Anything else is a peer that is not a channel of this job's kind.
  fail_peer(peer, {errc::invalid_message, "a control message that is no flush mark"});
}

void channel_core::flush(std::chrono::steady_clock::time_point deadline) {
  std::vector<std::pair<int, connection_ptr>> marked;
  {
    std::lock_guard lock{mu_};
    for (auto& [peer, conn] : connections_)
      if (open_.count(peer) && !failed_.count(peer)) marked.emplace_back(peer, conn);
  }
  for (auto& [peer, conn] : marked) conn->send_control({flush_mark}, {});
  std::unique_lock lock{mu_};
  connected_.wait_until(lock, deadline, [&] {
    return std::all_of(marked.begin(), marked.end(), [&](const auto& m) {
      return flushed_.count(m.first) || failed_.count(m.first);
    });
  });
}

void channel_core::close(const std::string& why) {
  std::vector<std::shared_ptr<request_state>> pending;
  {
    std::lock_guard lock{mu_};
    closed_ = true;
    closed_why_ = why;
    for (auto& [k, q] : posted_)
      for (auto& r : q) pending.push_back(r.state);
    posted_.clear();
    arrived_.clear();
    connections_.clear();
  }
  for (auto& s : pending)
    s->complete(error::disconnected("[channel " + name_ + "] " + why));
}

}  // namespace sailor::comm::channel_detail
