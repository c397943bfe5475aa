// The transport channel: one transport per rank, one connection per pair of peers (the
// lower rank connects to the higher one, whose address it reads from the rendezvous store),
// tensors as transport payloads matched by (peer, tag) in channel_core.
#include "sailor/comm/channel.hpp"

#include <mutex>
#include <set>

#include "channel_core.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/config/log.hpp"

namespace sailor::comm {
namespace {

using channel_detail::channel_core;
using clock_type = std::chrono::steady_clock;

class transport_channel final : public channel {
public:
  transport_channel(std::shared_ptr<channel_core> core, std::unique_ptr<transport> transport,
                    std::unique_ptr<listener> listener)
      : core_(std::move(core)), backend_(transport->name()), transport_(std::move(transport)),
        listener_(std::move(listener)) {}
  ~transport_channel() override {
    std::lock_guard lock{teardown_};
    if (!transport_) return;  // aborted
    // What was sent reaches the peers before the connections close (bounded).
    core_->flush(clock_type::now() + std::min(core_->timeout(), std::chrono::milliseconds{5000}));
    stop("the channel was closed");
  }
  // No flush: the transport goes at once. Its progress thread stops, so no buffer is touched
  // any more (a payload half landed from a silent peer included); its pending sends complete
  // (closed), then the core fails the receives.
  void abort(const std::string& why) override {
    std::lock_guard lock{teardown_};
    if (!transport_) return;
    log::get("comm")->debug("[channel {} rank {}] aborted: {}", core_->name(), core_->rank(), why);
    stop("aborted: " + why);
  }
  int rank() const override { return core_->rank(); }
  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) override {
    return core_->isend(buf, peer, tag);
  }
  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) override {
    return core_->irecv(buf, peer, tag);
  }
  std::chrono::milliseconds timeout() const override { return core_->timeout(); }
  std::string backend() const override { return backend_; }
  std::uint64_t bytes_sent() const override { return core_->bytes_sent; }
  std::uint64_t bytes_received() const override { return core_->bytes_received; }

private:
  // Holds teardown_.
  void stop(const std::string& why) {
    listener_.reset();
    // Completes every pending send (closed) and stops the callbacks; then the receives.
    transport_.reset();
    core_->close(why);
  }

  std::shared_ptr<channel_core> core_;
  const std::string backend_;
  std::mutex teardown_;  // the destructor and abort, on different threads
  std::unique_ptr<transport> transport_;
  std::unique_ptr<listener> listener_;
};

class transport_channel_factory final : public channel_factory {
public:
  transport_channel_factory(int global_rank, transport_channel_options options)
      : rank_(global_rank), options_(std::move(options)) {}

  result<std::unique_ptr<channel>> create(const std::string& name,
                                          const std::vector<int>& peers) override;

private:
  std::string address_key(const std::string& name, int r) const {
    return options_.prefix + "/channel/" + name + "/" + std::to_string(r);
  }
  result<std::string> address_of(const std::string& name, int peer, clock_type::time_point deadline);
  error setup_error(const std::string& name, const std::set<int>& missing,
                    const channel_core& core, clock_type::time_point deadline);

  const int rank_;
  const transport_channel_options options_;
  std::map<int, std::string> addresses_;  // of peers, for messages
};

result<std::string> transport_channel_factory::address_of(const std::string& name, int peer,
                                                          clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  auto bytes = options_.store->get(address_key(name, peer),
                                   std::max(left, std::chrono::milliseconds{1}));
  if (!bytes)
    return error::disconnected("[channel " + name + " rank " + std::to_string(rank_) + "] rank " +
                          std::to_string(peer) + " never published its address: " +
                          bytes.error().message);
  std::string text(bytes->begin(), bytes->end());
  addresses_[peer] = text;
  return text;
}

error transport_channel_factory::setup_error(const std::string& name, const std::set<int>& missing,
                                             const channel_core& core,
                                             clock_type::time_point deadline) {
  std::string text = "[channel " + name + " rank " + std::to_string(rank_) + "] ";
  for (int p : missing) {
    auto a = addresses_.find(p);
    std::string where = a == addresses_.end() ? "an address it never published" : a->second;
    if (auto f = core.failure_of(p))
      text += "could not reach rank " + std::to_string(p) + " at " + where + " (" + f->message + "); ";
    else if (p > rank_)
      text += "rank " + std::to_string(p) + " at " + where + " did not answer in time; ";
    else
      text += "rank " + std::to_string(p) + " (at " + where + ") did not connect in time; ";
  }
  (void)deadline;
  return error::disconnected(text.substr(0, text.size() - 2));
}

result<std::unique_ptr<channel>> transport_channel_factory::create(const std::string& name,
                                                                   const std::vector<int>& peers) {
  std::set<int> peer_set(peers.begin(), peers.end());
  peer_set.erase(rank_);
  const auto deadline = clock_type::now() + options_.timeout;
  auto core = std::make_shared<channel_core>(rank_, name, peer_set, options_.timeout);
  transport_options topts = options_.transport;
  topts.local_name = core->transport_name(rank_);
  auto made = options_.make_transport ? options_.make_transport(topts) : make_tcp_transport(topts);
  if (!made) return made.error();
  std::unique_ptr<transport> transport = std::move(*made);
  std::weak_ptr<channel_core> weak = core;
  auto listening = transport->listen(
      address{options_.host, 0}, [weak](const connection_ptr& conn) -> connection_handlers {
        auto self = weak.lock();
        int peer = self ? self->peer_of_name(conn->peer().name) : -1;
        if (peer < 0 || peer > self->rank()) {
          // Not a lower-numbered peer of this channel: another job's or a stale plan's rank.
          conn->close();
          return {};
        }
        self->attach(peer, conn, true);
        return self->handlers_for(peer);
      });
  if (!listening) return listening.error();
  std::unique_ptr<listener> listener = std::move(*listening);
  const std::string mine = address{options_.host, listener->local_address().port}.to_string();
  if (auto err = options_.store->set(address_key(name, rank_), {mine.begin(), mine.end()}))
    return *err;
  for (int p : peer_set) {
    if (p < rank_) continue;
    auto text = address_of(name, p, deadline);
    if (!text) return text.error();
    auto where = address::parse(*text);
    if (!where) return where.error();
    auto handlers = core->handlers_for(p);
    handlers.on_open = [weak, p] {
      if (auto self = weak.lock()) self->mark_open(p);
    };
    auto conn = transport->connect(*where, std::move(handlers));
    if (!conn) return conn.error();
    core->attach(p, *conn, false);
  }
  auto missing = core->wait_connected(deadline);
  if (!missing.empty()) {
    for (int p : missing)
      if (p < rank_ && !addresses_.count(p)) (void)address_of(name, p, clock_type::now());
    return setup_error(name, missing, *core, deadline);
  }
  log::get("comm")->debug("[channel {} rank {}] connected to {} peers over {} at {}", name, rank_,
                          peer_set.size(), transport->name(), mine);
  return std::unique_ptr<channel>{
      std::make_unique<transport_channel>(core, std::move(transport), std::move(listener))};
}

}  // namespace

std::unique_ptr<channel_factory> make_transport_channel_factory(int global_rank,
                                                                transport_channel_options options) {
  return std::make_unique<transport_channel_factory>(global_rank, std::move(options));
}

}  // namespace sailor::comm
