// The link shaper: a decorator of any transport. Outgoing messages of each connection wait
// in one FIFO; a timer thread hands each to the inner transport at its release time (see
// shape_step), so order is kept and the link's latency and bandwidth are imposed.

#include "sailor/comm/shaping.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "handshake.hpp"
#include "sailor/config/log.hpp"

namespace sailor::comm {

link_clock_step shape_step(const config::zone_link& link, double now_s, double link_free_s,
                           double bytes) {
  double bw = link.bytes_per_s(bytes);
  double serialize = bw > 0 ? bytes / bw : 0;
  double start = std::max(now_s, link_free_s);
  double free_again = start + serialize;
  return {free_again + link.latency_s, free_again};
}

link_lookup links_of(config::cluster cluster) {
  auto shared = std::make_shared<config::cluster>(std::move(cluster));
  return [shared](const std::string& a, const std::string& b) { return shared->link(a, b); };
}

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point origin) {
  return std::chrono::duration<double>(clock_type::now() - origin).count();
}

class shaper_core;

struct queued_send {
  bool tensor = false;
  std::vector<std::byte> control;
  tensor_descriptor desc;
  std::span<const std::byte> payload;
  completion done;
  double enqueued_s = 0;
  double release_s = -1;  // < 0: the link is not known yet
};

class shaped_connection final : public connection,
                                public std::enable_shared_from_this<shaped_connection> {
public:
  shaped_connection(std::shared_ptr<shaper_core> core, std::uint64_t id)
      : core_(std::move(core)), id_(id) {}

  void send_control(std::vector<std::byte> bytes, completion done) override;
  void send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                   completion done) override;
  void close() override;
  connection_state state() const override;
  peer_info peer() const override { return inner_ ? inner_->peer() : peer_info{}; }
  std::uint64_t id() const override { return id_; }

  // Handlers for the inner connection, forwarding to the user's.
  connection_handlers inner_handlers();
  void enqueue(queued_send s);

  std::shared_ptr<shaper_core> core_;
  const std::uint64_t id_;
  connection_ptr inner_;
  connection_handlers user_;  // called on the inner progress thread only
  // Guarded by core_->mutex_:
  std::optional<std::string> peer_zone_;  // known once the handshake finished
  double link_free_s_ = 0;
  std::deque<queued_send> queue_;
  bool closing_ = false;
  bool finished_ = false;  // closed or failed: no more sends
  std::optional<transport_error> error_;
};

class shaper_core : public std::enable_shared_from_this<shaper_core> {
public:
  shaper_core(link_lookup links, std::string local_zone)
      : links_(std::move(links)), local_zone_(std::move(local_zone)), log_(log::get("comm")) {}

  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void stop();
  void loop();
  // With mutex_ held: gives every queued message of `c` without a release time one.
  void schedule(shaped_connection& c);
  void set_link(const std::shared_ptr<shaped_connection>& c, const std::string& peer_zone);
  void finish(const std::shared_ptr<shaped_connection>& c, const transport_error& err,
              bool notify_user);

  link_lookup links_;
  std::string local_zone_;
  std::shared_ptr<spdlog::logger> log_;
  const clock_type::time_point origin_ = clock_type::now();
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::uint64_t, std::shared_ptr<shaped_connection>> live_;
  std::atomic<std::uint64_t> next_id_{1};
  std::thread thread_;
};

void shaper_core::schedule(shaped_connection& c) {
  if (!c.peer_zone_) return;
  // Looked up again for every message scheduled: a link changed at run time (link_table.hpp)
  // applies to the bytes sent from then on.
  std::optional<config::zone_link> link;
  for (auto& s : c.queue_) {
    if (s.release_s >= 0) continue;
    if (!link) link = links_(local_zone_, *c.peer_zone_);
    double bytes = s.tensor ? static_cast<double>(s.payload.size()) : static_cast<double>(s.control.size());
    auto step = shape_step(*link, s.enqueued_s, c.link_free_s_, bytes);
    s.release_s = step.release_s;
    c.link_free_s_ = step.link_free_s;
  }
}

void shaper_core::set_link(const std::shared_ptr<shaped_connection>& c, const std::string& peer_zone) {
  auto link = links_(local_zone_, peer_zone);
  log_->debug("[link {}->{}] latency {} s, bandwidth {} GB/s", local_zone_, peer_zone,
              link.latency_s, link.bandwidth_gbytes_per_s);
  {
    std::lock_guard lock(mutex_);
    c->peer_zone_ = peer_zone;
    schedule(*c);
  }
  cv_.notify_all();
}

void shaper_core::finish(const std::shared_ptr<shaped_connection>& c, const transport_error& err,
                         bool notify_user) {
  std::deque<queued_send> dropped;
  {
    std::lock_guard lock(mutex_);
    if (c->finished_) return;
    c->finished_ = true;
    c->error_ = err;
    dropped.swap(c->queue_);
    live_.erase(c->id_);
  }
  for (auto& s : dropped) detail::complete(s.done, err);
  if (notify_user) {
    auto on_error = std::move(c->user_.on_error);
    c->user_ = {};
    if (on_error) on_error(err);
  }
}

void shaper_core::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::map<std::uint64_t, std::shared_ptr<shaped_connection>> live;
  {
    std::lock_guard lock(mutex_);
    live.swap(live_);
  }
  for (auto& [id, c] : live) finish(c, {errc::closed, "transport shut down"}, false);
}

void shaper_core::loop() {
  struct release {
    std::shared_ptr<shaped_connection> conn;
    queued_send send;
  };
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    double now = seconds_since(origin_);
    double next = -1;
    std::vector<release> due;
    std::vector<std::shared_ptr<shaped_connection>> to_close;
    for (auto& [id, c] : live_) {
      while (!c->queue_.empty() && c->queue_.front().release_s >= 0 &&
             c->queue_.front().release_s <= now) {
        due.push_back({c, std::move(c->queue_.front())});
        c->queue_.pop_front();
      }
      if (!c->queue_.empty() && c->queue_.front().release_s >= 0)
        next = next < 0 ? c->queue_.front().release_s : std::min(next, c->queue_.front().release_s);
      if (c->queue_.empty() && c->closing_) to_close.push_back(c);
    }
    if (!due.empty() || !to_close.empty()) {
      lock.unlock();
      // In queue order per connection: the inner transport keeps it.
      for (auto& r : due) {
        if (r.send.tensor)
          r.conn->inner_->send_tensor(std::move(r.send.desc), r.send.payload, std::move(r.send.done));
        else
          r.conn->inner_->send_control(std::move(r.send.control), std::move(r.send.done));
      }
      for (auto& c : to_close) {
        c->inner_->close();
        finish(c, {errc::closed, "connection closed locally"}, false);
      }
      lock.lock();
      continue;
    }
    if (next < 0)
      cv_.wait(lock);
    else
      cv_.wait_until(lock, origin_ + std::chrono::duration_cast<clock_type::duration>(
                                         std::chrono::duration<double>(next)));
  }
}

// ---------------------------------------------------------------- connection

connection_state shaped_connection::state() const {
  {
    std::lock_guard lock(core_->mutex_);
    if (closing_ || (finished_ && error_ && error_->code == errc::closed)) return connection_state::closed;
    if (finished_) return connection_state::failed;
  }
  return inner_ ? inner_->state() : connection_state::connecting;
}

void shaped_connection::enqueue(queued_send s) {
  s.enqueued_s = seconds_since(core_->origin_);
  std::optional<transport_error> refused;
  {
    std::lock_guard lock(core_->mutex_);
    if (finished_ || closing_ || core_->stopping_) {
      refused = error_.value_or(transport_error{errc::closed, "connection closed"});
    } else {
      queue_.push_back(std::move(s));
      core_->schedule(*this);
    }
  }
  if (refused) {
    detail::complete(s.done, refused);
    return;
  }
  core_->cv_.notify_all();
}

void shaped_connection::send_control(std::vector<std::byte> bytes, completion done) {
  queued_send s;
  s.control = std::move(bytes);
  s.done = std::move(done);
  enqueue(std::move(s));
}

void shaped_connection::send_tensor(tensor_descriptor desc, std::span<const std::byte> payload,
                                    completion done) {
  queued_send s;
  s.tensor = true;
  desc.bytes = payload.size();
  s.desc = std::move(desc);
  s.payload = payload;
  s.done = std::move(done);
  enqueue(std::move(s));
}

void shaped_connection::close() {
  {
    std::lock_guard lock(core_->mutex_);
    if (finished_ || closing_) return;
    closing_ = true;  // the timer thread closes the inner connection once the queue drained
  }
  core_->cv_.notify_all();
}

connection_handlers shaped_connection::inner_handlers() {
  connection_handlers h;
  auto self = shared_from_this();
  h.on_open = [self] {
    self->core_->set_link(self, self->inner_->peer().zone);
    if (self->user_.on_open) self->user_.on_open();
  };
  h.on_control = [self](std::vector<std::byte> bytes) {
    if (self->user_.on_control) self->user_.on_control(std::move(bytes));
  };
  h.on_tensor = [self](tensor_descriptor d, payload_buffer p) {
    if (self->user_.on_tensor) self->user_.on_tensor(std::move(d), std::move(p));
  };
  h.on_error = [self](const transport_error& e) { self->core_->finish(self, e, true); };
  h.allocate = [self](const tensor_descriptor& d) {
    return self->user_.allocate ? self->user_.allocate(d) : payload_buffer::allocate(d.bytes);
  };
  return h;
}

// ---------------------------------------------------------------- transport

class shaped_transport final : public transport {
public:
  shaped_transport(std::unique_ptr<transport> inner, link_lookup links)
      : inner_(std::move(inner)),
        core_(std::make_shared<shaper_core>(std::move(links), inner_->options().local_zone)) {
    core_->start();
  }
  ~shaped_transport() override {
    core_->stop();
    inner_.reset();
  }

  using transport::listen;
  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused) override {
    auto core = core_;
    return inner_->listen(where, [core, on_accept = std::move(on_accept)](const connection_ptr& inner) {
      auto c = std::make_shared<shaped_connection>(core, core->next_id_++);
      c->inner_ = inner;
      {
        std::lock_guard lock(core->mutex_);
        core->live_.emplace(c->id_, c);
      }
      core->set_link(c, inner->peer().zone);
      if (on_accept) c->user_ = on_accept(c);
      return c->inner_handlers();
    }, std::move(on_refused));
  }

  result<connection_ptr> connect(const address& to, connection_handlers handlers) override {
    auto c = std::make_shared<shaped_connection>(core_, core_->next_id_++);
    c->user_ = std::move(handlers);
    // The inner connection exists before any of its callbacks can run: they run on its
    // progress thread after connect() returned, and c->inner_ is set right below... so
    // hold the callbacks back until then.
    auto gate = std::make_shared<std::mutex>();
    std::unique_lock hold(*gate);
    auto inner_h = c->inner_handlers();
    auto wrap = [gate](auto fn) {
      return [gate, fn = std::move(fn)](auto&&... args) {
        { std::lock_guard wait(*gate); }
        fn(std::forward<decltype(args)>(args)...);
      };
    };
    connection_handlers gated;
    gated.on_open = wrap(inner_h.on_open);
    gated.on_control = wrap(inner_h.on_control);
    gated.on_tensor = wrap(inner_h.on_tensor);
    gated.on_error = wrap(inner_h.on_error);
    gated.allocate = [gate, fn = inner_h.allocate](const tensor_descriptor& d) {
      { std::lock_guard wait(*gate); }
      return fn(d);
    };
    auto inner = inner_->connect(to, std::move(gated));
    if (!inner) return inner.error();
    c->inner_ = *inner;
    {
      std::lock_guard lock(core_->mutex_);
      core_->live_.emplace(c->id_, c);
    }
    hold.unlock();
    return connection_ptr(c);
  }

  void post(std::function<void()> fn) override { inner_->post(std::move(fn)); }
  std::string name() const override { return "shaped(" + inner_->name() + ")"; }
  const transport_options& options() const override { return inner_->options(); }

private:
  std::unique_ptr<transport> inner_;
  std::shared_ptr<shaper_core> core_;
};

}  // namespace

std::unique_ptr<transport> make_shaped_transport(std::unique_ptr<transport> inner,
                                                 link_lookup links) {
  return std::make_unique<shaped_transport>(std::move(inner), std::move(links));
}

}  // namespace sailor::comm
