// The Gloo backend of the collective interface: TCP device, rendezvous through a FileStore
// (processes) or an in-memory HashStore (rank threads of one process).
//
// Point-to-point transfers use Gloo's unbound buffers. Gloo has no non-blocking completion
// test, so each request has a waiter thread that blocks in waitSend/waitRecv and signals a
// condition variable of its communicator: test() and wait_any() then never block on Gloo.
// Collectives and point-to-point transfers use disjoint slots (a prefix byte of our own each).
//
// The collectives run on Gloo's transport, not on its collective functions (gloo_ops.hpp
// says why: so that abort() can end them); an abort closes the context's connections and
// wakes every wait on the buffers of the operations and requests in flight.

#include <sailor/comm/collective.hpp>

#include "gloo_ops.hpp"
#include "gloo_store.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

namespace sailor::comm {
namespace {

using namespace std::chrono_literals;
using gloo_detail::abort_state;
using gloo_reduce_fn = gloo_detail::reduce_fn;

// Slots: a prefix in the top byte (Gloo's own collectives would use 0x01..0x08), below it
// the caller's tag (point to point) or the operation's number (collectives).
constexpr std::uint64_t p2p_slot_prefix = std::uint64_t{0xA5} << 56;
constexpr std::uint64_t collective_slot_prefix = std::uint64_t{0xA6} << 56;
constexpr std::uint64_t slot_mask = (std::uint64_t{1} << 56) - 1;

// Wakes wait_any when any request of a communicator completes.
struct notifier {
  std::mutex mutex;
  std::condition_variable cv;
  void notify() {
    { std::lock_guard<std::mutex> lock(mutex); }
    cv.notify_all();
  }
};

class gloo_request final : public request {
public:
  // `buf` is posted already (registered with `abort` before, so an abort wakes its wait).
  gloo_request(std::unique_ptr<gloo_detail::op_buffer> buf, bool is_send,
               std::chrono::milliseconds timeout, std::shared_ptr<notifier> note,
               std::shared_ptr<abort_state> abort, std::string who)
      : abort_(std::move(abort)), buf_(std::move(buf)), note_(std::move(note)), who_(std::move(who)) {
    gloo_detail::op_buffer* raw = buf_.get();
    waiter_ = std::thread([this, raw, is_send, timeout] {
      status outcome;
      try {
        is_send ? raw->wait_send(timeout) : raw->wait_recv(timeout);
      } catch (const std::exception& e) {
        outcome = abort_->is_aborted() ? abort_->aborted_error(who_)
                                       : error::disconnected("[comm " + who_ + "] " + e.what());
      }
      {
        std::lock_guard<std::mutex> lock(note_->mutex);
        outcome_ = std::move(outcome);
        done_.store(true, std::memory_order_release);
      }
      note_->cv.notify_all();
    });
  }

  ~gloo_request() override {
    if (waiter_.joinable()) waiter_.join();
  }

  status wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(note_->mutex);
    if (!note_->cv.wait_for(lock, timeout, [this] { return done_.load(std::memory_order_acquire); }))
      return error::disconnected("[comm " + who_ + "] transfer timed out");
    return outcome_;
  }

  bool test() override { return done_.load(std::memory_order_acquire); }

private:
  std::shared_ptr<abort_state> abort_;  // outlives buf_, which deregisters from it
  std::unique_ptr<gloo_detail::op_buffer> buf_;
  std::shared_ptr<notifier> note_;
  std::string who_;
  std::atomic<bool> done_{false};
  status outcome_;
  std::thread waiter_;
};

// A request that is already complete (size-1 groups, empty buffers).
class done_request final : public request {
public:
  explicit done_request(status s = {}) : status_(std::move(s)) {}
  status wait(std::chrono::milliseconds) override { return status_; }
  bool test() override { return true; }

private:
  status status_;
};

template <class T>
gloo_reduce_fn reduce_fn(reduce_op op) {
  if (op == reduce_op::max) return static_cast<gloo_reduce_fn>(&gloo::max<T>);
  return static_cast<gloo_reduce_fn>(&gloo::sum<T>);
}

class gloo_communicator final : public communicator {
public:
  gloo_communicator(std::string name, std::shared_ptr<gloo::Context> context,
                    std::chrono::milliseconds timeout)
      : name_(std::move(name)),
        context_(std::move(context)),
        timeout_(timeout),
        note_(std::make_shared<notifier>()),
        abort_(std::make_shared<abort_state>()) {}

  void abort(const std::string& why) override { abort_->abort(context_.get(), why); }

  int rank() const override { return context_ ? context_->rank : 0; }
  int size() const override { return context_ ? context_->size : 1; }
  const std::string& name() const override { return name_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  status all_reduce(buffer_view buf, reduce_op op) override {
    if (aborted()) return abort_->aborted_error(name_);
    if (size() == 1 || buf.count == 0) return {};
    gloo_reduce_fn fn = nullptr;
    switch (buf.type) {
      case element_type::f32: fn = reduce_fn<float>(op); break;
      case element_type::f64: fn = reduce_fn<double>(op); break;
      case element_type::f16: fn = reduce_fn<gloo::float16>(op); break;
      case element_type::i32: fn = reduce_fn<std::int32_t>(op); break;
      case element_type::i64: fn = reduce_fn<std::int64_t>(op); break;
      case element_type::u8: fn = reduce_fn<std::uint8_t>(op); break;
      case element_type::bf16:
        return error::unimplemented("[comm " + name_ + "] bf16 all_reduce is not supported by Gloo");
    }
    return guarded("all_reduce", [&](const gloo_detail::op_context& c) {
      gloo_detail::ring_all_reduce(c, buf, fn);
    });
  }

  status broadcast(buffer_view buf, int root) override {
    if (aborted()) return abort_->aborted_error(name_);
    if (size() == 1 || buf.count == 0) return {};
    return guarded("broadcast", [&](const gloo_detail::op_context& c) {
      gloo_detail::broadcast_from(c, buf, root);
    });
  }

  status all_gather(buffer_view in, buffer_view out) override {
    if (aborted()) return abort_->aborted_error(name_);
    if (out.bytes() != in.bytes() * static_cast<std::size_t>(size()))
      return error::invalid_input("", "[comm " + name_ + "] all_gather: output must hold size() inputs");
    if (size() == 1) {
      if (in.data != out.data && in.bytes() > 0) std::memcpy(out.data, in.data, in.bytes());
      return {};
    }
    return guarded("all_gather", [&](const gloo_detail::op_context& c) {
      gloo_detail::ring_all_gather(c, in, out);
    });
  }

  // Returns once every rank has arrived: an all-gather of one byte each.
  status barrier() override {
    if (aborted()) return abort_->aborted_error(name_);
    if (size() == 1) return {};
    std::uint8_t mine = 1;
    std::vector<std::uint8_t> all(static_cast<std::size_t>(size()));
    return guarded("barrier", [&](const gloo_detail::op_context& c) {
      gloo_detail::ring_all_gather(c, {&mine, 1, element_type::u8},
                                   {all.data(), all.size(), element_type::u8});
    });
  }

  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    return start(buf, peer, tag, true);
  }
  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    return start(buf, peer, tag, false);
  }

  result<int> wait_any(const std::vector<request*>& requests,
                       std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(note_->mutex);
    int found = -1;
    bool any = false;
    auto ready = [&] {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        if (!requests[i]) continue;
        any = true;
        if (requests[i]->test()) {
          found = static_cast<int>(i);
          return true;
        }
      }
      return !any;
    };
    // Requests of this communicator signal note_; others (done_request) are ready at once.
    bool ok = note_->cv.wait_for(lock, timeout, ready);
    if (!any) return error::invalid_input("", "wait_any: no request to wait for");
    if (!ok) return error::disconnected("[comm " + name_ + "] wait_any timed out");
    return found;
  }

private:
  bool aborted() { return abort_->is_aborted(); }

  // Runs a collective with the next slot (every rank issues collectives in one order) and the
  // communicator's timeout; Gloo's exceptions (a peer gone, the timeout) and an abort become
  // errors.
  template <class Fn>
  status guarded(const char* what, Fn&& fn) {
    const gloo_detail::op_context c{*context_, *abort_,
                                    collective_slot_prefix | (next_op_++ & slot_mask), timeout_};
    try {
      fn(c);
      return {};
    } catch (const std::exception& e) {
      if (aborted()) return abort_->aborted_error(name_);
      return error::disconnected("[comm " + name_ + "] " + what + ": " + e.what());
    }
  }

  std::unique_ptr<request> start(buffer_view buf, int peer, std::uint64_t tag, bool is_send) {
    if (peer < 0 || peer >= size() || peer == rank())
      return std::make_unique<done_request>(
          error::invalid_input("", "[comm " + name_ + "] bad peer " + std::to_string(peer)));
    if (aborted()) return std::make_unique<done_request>(abort_->aborted_error(name_));
    if (buf.bytes() == 0) return std::make_unique<done_request>();
    try {
      auto ub = std::make_unique<gloo_detail::op_buffer>(*context_, *abort_, buf.data, buf.bytes());
      const std::uint64_t slot = p2p_slot_prefix | (tag & slot_mask);
      if (is_send)
        ub->send(peer, slot, 0, buf.bytes());
      else
        ub->recv(peer, slot, 0, buf.bytes());
      return std::make_unique<gloo_request>(std::move(ub), is_send, timeout_, note_, abort_, name_);
    } catch (const std::exception& e) {
      if (aborted()) return std::make_unique<done_request>(abort_->aborted_error(name_));
      return std::make_unique<done_request>(
          error::disconnected("[comm " + name_ + "] " + e.what()));
    }
  }

  std::string name_;
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<notifier> note_;
  std::shared_ptr<abort_state> abort_;
  std::uint64_t next_op_ = 0;
};

class gloo_factory final : public communicator_factory {
public:
  gloo_factory(int global_rank, gloo_options options,
               std::shared_ptr<gloo::rendezvous::Store> store,
               std::shared_ptr<gloo::transport::Device> device)
      : global_rank_(global_rank),
        options_(std::move(options)),
        store_(std::move(store)),
        device_(std::move(device)) {}

  int global_rank() const override { return global_rank_; }

  result<std::unique_ptr<communicator>> create(const std::string& name,
                                               const std::vector<int>& global_ranks) override {
    int me = -1;
    for (std::size_t i = 0; i < global_ranks.size(); ++i)
      if (global_ranks[i] == global_rank_) me = static_cast<int>(i);
    if (me < 0)
      return error::invalid_input("", "[comm " + name + "] global rank " + std::to_string(global_rank_) +
                       " is not a member");
    if (global_ranks.size() == 1)
      return std::unique_ptr<communicator>(
          std::make_unique<gloo_communicator>(name, nullptr, options_.timeout));
    try {
      gloo::rendezvous::PrefixStore prefixed(options_.prefix + "/" + name, *store_);
      auto context = std::make_shared<gloo::rendezvous::Context>(
          me, static_cast<int>(global_ranks.size()));
      context->setTimeout(options_.timeout);
      gloo_detail::sigpipe_blocked quiet;
      context->connectFullMesh(prefixed, device_);
      return std::unique_ptr<communicator>(
          std::make_unique<gloo_communicator>(name, std::move(context), options_.timeout));
    } catch (const std::exception& e) {
      return error::disconnected("[comm " + name + "] rendezvous failed: " + std::string(e.what()));
    }
  }

private:
  int global_rank_;
  gloo_options options_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
};

}  // namespace

// Gloo's view of a rendezvous_store. Gloo reports a failed rendezvous by exception; the
// factory's create() catches it at the boundary.
class store_adapter final : public gloo::rendezvous::Store {
public:
  store_adapter(std::shared_ptr<rendezvous_store> inner, std::chrono::milliseconds timeout)
      : inner_(std::move(inner)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    if (auto err = inner_->set(key, data))
      throw gloo::IoException("rendezvous store: set '" + key + "': " + err->message);
  }
  std::vector<char> get(const std::string& key) override { return fetch(key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const auto& key : keys) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      fetch(key, std::max(left, std::chrono::milliseconds{1}));
    }
  }

private:
  std::vector<char> fetch(const std::string& key, std::chrono::milliseconds timeout) {
    auto value = inner_->get(key, timeout);
    if (!value)
      throw gloo::IoException("rendezvous store: get '" + key + "': " + value.error().message);
    return std::move(*value);
  }

  std::shared_ptr<rendezvous_store> inner_;
  std::chrono::milliseconds timeout_;
};

std::shared_ptr<void> make_in_process_store() {
  // Stored as a Store pointer so that make_gloo_factory can cast it back.
  std::shared_ptr<gloo::rendezvous::Store> store = std::make_shared<gloo::rendezvous::HashStore>();
  return store;
}

result<std::shared_ptr<gloo::rendezvous::Store>> make_gloo_store(const gloo_options& options) {
  if (options.store) {
    std::shared_ptr<gloo::rendezvous::Store> store =
        std::make_shared<store_adapter>(options.store, options.timeout);
    return store;
  }
  if (!options.store_path.empty()) {
    try {
      std::shared_ptr<gloo::rendezvous::Store> store =
          std::make_shared<gloo::rendezvous::FileStore>(options.store_path);
      return store;
    } catch (const std::exception& e) {
      return error::failed("gloo store " + options.store_path + ": " + e.what());
    }
  }
  if (options.in_process_store)
    return std::static_pointer_cast<gloo::rendezvous::Store>(options.in_process_store);
  return error::invalid_input("", "gloo_options: set store, store_path or in_process_store");
}

result<std::unique_ptr<communicator_factory>> make_gloo_factory(int global_rank,
                                                                 const gloo_options& options) {
  auto made = make_gloo_store(options);
  if (!made) return made.error();
  std::shared_ptr<gloo::rendezvous::Store> store = std::move(*made);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    gloo_detail::sigpipe_blocked quiet;  // inherited by the device's thread, which writes too
    auto device = gloo::transport::tcp::CreateDevice(attr);
    return std::unique_ptr<communicator_factory>(
        std::make_unique<gloo_factory>(global_rank, options, std::move(store), std::move(device)));
  } catch (const std::exception& e) {
    return error::failed("gloo tcp device on " + options.hostname + ": " + e.what());
  }
}

}  // namespace sailor::comm
