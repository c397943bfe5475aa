// The Gloo backend of the collective interface: TCP device, rendezvous through a FileStore
// (processes) or an in-memory HashStore (rank threads of one process).
//
// Point-to-point transfers use Gloo's unbound buffers. Gloo has no non-blocking completion
// test, so each request has a waiter thread that blocks in waitSend/waitRecv and signals a
// condition variable of its communicator: test() and wait_any() then never block on Gloo.
// Collectives and point-to-point transfers use disjoint slots (a prefix byte of our own).

#include <sailor/comm/collective.hpp>

#include "gloo_store.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <gloo/allgather.h>
#include <gloo/common/error.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
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
using gloo_reduce_fn = void (*)(void*, const void*, const void*, size_t);

// Slots of point-to-point messages: our prefix in the top byte (Gloo's collectives use
// 0x01..0x08), the caller's tag below.
constexpr std::uint64_t p2p_slot_prefix = std::uint64_t{0xA5} << 56;

error failure(const std::string& who, const std::string& what) {
  return error::failed("[comm " + who + "] " + what);
}

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
  gloo_request(std::unique_ptr<gloo::transport::UnboundBuffer> buf, bool is_send,
               std::chrono::milliseconds timeout, std::shared_ptr<notifier> note,
               std::string who)
      : buf_(std::move(buf)), note_(std::move(note)), who_(std::move(who)) {
    gloo::transport::UnboundBuffer* raw = buf_.get();
    waiter_ = std::thread([this, raw, is_send, timeout] {
      status outcome;
      try {
        bool ok = is_send ? raw->waitSend(timeout) : raw->waitRecv(timeout);
        if (!ok) outcome = failure(who_, is_send ? "send aborted" : "recv aborted");
      } catch (const std::exception& e) {
        outcome = error::disconnected("[comm " + who_ + "] " + e.what());
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
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
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
        note_(std::make_shared<notifier>()) {}

  int rank() const override { return context_ ? context_->rank : 0; }
  int size() const override { return context_ ? context_->size : 1; }
  const std::string& name() const override { return name_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  status all_reduce(buffer_view buf, reduce_op op) override {
    if (size() == 1 || buf.count == 0) return {};
    return guarded("all_reduce", [&] {
      gloo::AllreduceOptions opts(context_);
      stamp(opts);
      switch (buf.type) {
        case element_type::f32: set_allreduce<float>(opts, buf, op); break;
        case element_type::f64: set_allreduce<double>(opts, buf, op); break;
        case element_type::f16: set_allreduce<gloo::float16>(opts, buf, op); break;
        case element_type::i32: set_allreduce<std::int32_t>(opts, buf, op); break;
        case element_type::i64: set_allreduce<std::int64_t>(opts, buf, op); break;
        case element_type::u8: set_allreduce<std::uint8_t>(opts, buf, op); break;
        case element_type::bf16: throw std::runtime_error("bf16 all_reduce is not supported by Gloo");
      }
      gloo::allreduce(opts);
    });
  }

  status broadcast(buffer_view buf, int root) override {
    if (size() == 1 || buf.count == 0) return {};
    return guarded("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      stamp(opts);
      opts.setRoot(root);
      opts.setOutput(static_cast<std::uint8_t*>(buf.data), buf.bytes());
      gloo::broadcast(opts);
    });
  }

  status all_gather(buffer_view in, buffer_view out) override {
    if (out.bytes() != in.bytes() * static_cast<std::size_t>(size()))
      return error::invalid_input("", "[comm " + name_ + "] all_gather: output must hold size() inputs");
    if (size() == 1) {
      if (in.data != out.data && in.bytes() > 0) std::memcpy(out.data, in.data, in.bytes());
      return {};
    }
    return guarded("all_gather", [&] {
      gloo::AllgatherOptions opts(context_);
      stamp(opts);
      opts.setInput(static_cast<std::uint8_t*>(in.data), in.bytes());
      opts.setOutput(static_cast<std::uint8_t*>(out.data), out.bytes());
      gloo::allgather(opts);
    });
  }

  status barrier() override {
    if (size() == 1) return {};
    return guarded("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      stamp(opts);
      gloo::barrier(opts);
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
  template <class T>
  static void set_allreduce(gloo::AllreduceOptions& opts, buffer_view buf, reduce_op op) {
    opts.setOutput(static_cast<T*>(buf.data), buf.count);
    opts.setReduceFunction(reduce_fn<T>(op));
  }

  template <class Fn>
  status guarded(const char* what, Fn&& fn) {
    try {
      fn();
      return {};
    } catch (const std::exception& e) {
      return error::disconnected("[comm " + name_ + "] " + what + ": " + e.what());
    }
  }

  std::unique_ptr<request> start(buffer_view buf, int peer, std::uint64_t tag, bool is_send) {
    if (peer < 0 || peer >= size() || peer == rank())
      return std::make_unique<done_request>(
          error::invalid_input("", "[comm " + name_ + "] bad peer " + std::to_string(peer)));
    if (buf.bytes() == 0) return std::make_unique<done_request>();
    try {
      auto ub = context_->createUnboundBuffer(buf.data, buf.bytes());
      std::uint64_t slot = p2p_slot_prefix | (tag & ((std::uint64_t{1} << 56) - 1));
      if (is_send)
        ub->send(peer, slot);
      else
        ub->recv(peer, slot);
      return std::make_unique<gloo_request>(std::move(ub), is_send, timeout_, note_, name_);
    } catch (const std::exception& e) {
      return std::make_unique<done_request>(
          error::disconnected("[comm " + name_ + "] " + e.what()));
    }
  }

  // Gives a collective's options the next tag (every rank issues collectives in one order) and
  // the communicator's timeout.
  template <class Options>
  void stamp(Options& opts) {
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
  }

  std::string name_;
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<notifier> note_;
  std::uint32_t next_tag_ = 0;
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
    auto device = gloo::transport::tcp::CreateDevice(attr);
    return std::unique_ptr<communicator_factory>(
        std::make_unique<gloo_factory>(global_rank, options, std::move(store), std::move(device)));
  } catch (const std::exception& e) {
    return error::failed("gloo tcp device on " + options.hostname + ": " + e.what());
  }
}

}  // namespace sailor::comm
