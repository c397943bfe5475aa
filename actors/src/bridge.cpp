#include "sailor/actors/bridge.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <caf/actor_proxy.hpp>
#include <caf/exit_reason.hpp>
#include <caf/make_actor.hpp>
#include <caf/mailbox_element.hpp>

#include "peer_checks.hpp"
#include "sailor/actors/wire.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/config/log.hpp"

namespace sailor::actors {

struct bridge::core : std::enable_shared_from_this<bridge::core> {
  struct peer_entry {
    std::shared_ptr<link> connection;
    std::map<std::string, caf::strong_actor_ptr> proxies;
    bool closed = false;
    bool has_spoken = false;  // a valid frame arrived: later failures are not door refusals
  };

  explicit core(caf::actor_system& sys) : system(sys) {}

  caf::actor_system& system;
  comm::transport* transport = nullptr;
  mutable std::mutex mutex;
  std::map<std::string, caf::actor> published;
  std::map<caf::actor_addr, std::string> names;
  std::map<peer_id, peer_entry> peers;
  std::function<void(const peer_refused&)> refusal_observer;
  std::unique_ptr<link_listener> listener;
  peer_id next_peer = 1;

  std::string name_of(const caf::strong_actor_ptr& sender) {
    if (!sender)
      return {};
    std::lock_guard<std::mutex> guard{mutex};
    auto i = names.find(caf::actor_cast<caf::actor_addr>(sender));
    return i == names.end() ? std::string{} : i->second;
  }

  caf::strong_actor_ptr proxy_for(peer_id peer, const std::string& name);
  peer_id add(std::shared_ptr<link> l);
  void on_frame(peer_id peer, std::vector<char>&& frame);
  void on_closed(peer_id peer, const std::string& reason);
  void refuse(peer_id peer, const std::string& reason, refuse_reason code);
  std::optional<std::string> speaks_for_another(peer_id peer, const caf::message& body);
  std::string peer_name(peer_id peer);
};

namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// A local stand-in for an actor in another process. Not scheduled: `enqueue` encodes and
// writes the message on the sender's thread, so nothing sent before a process exits is lost
// in a mailbox, and the actor system does not wait for proxies when it shuts down.
class remote_proxy final : public caf::actor_proxy {
public:
  remote_proxy(caf::actor_config& cfg, std::weak_ptr<bridge::core> owner,
               std::shared_ptr<link> connection, std::string remote_name)
    : caf::actor_proxy(cfg),
      owner_(std::move(owner)),
      connection_(std::move(connection)),
      remote_name_(std::move(remote_name)) {}

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    auto owner = owner_.lock();
    if (!owner || getf(is_terminated_flag)) {
      bounce(what);
      return;
    }
    auto msg = what->move_content_to_message();
    auto frame = encode_envelope(owner->system, owner->name_of(what->sender), remote_name_, msg);
    if (!frame) {
      log::get("actors")->warn("[bridge {}] dropped a message to '{}': {}",
                               connection_->peer(), remote_name_, frame.error().message);
      return;
    }
    if (!connection_->send(*frame))
      log::get("actors")->debug("[bridge {}] link closed; message to '{}' dropped",
                                connection_->peer(), remote_name_);
  }

  void kill_proxy(caf::execution_unit* host, caf::error reason) override {
    cleanup(std::move(reason), host);
  }

  const char* name() const override { return "remote_proxy"; }

private:
  std::weak_ptr<bridge::core> owner_;
  std::shared_ptr<link> connection_;
  std::string remote_name_;
};

void kill(const caf::strong_actor_ptr& proxy) {
  if (auto* p = dynamic_cast<remote_proxy*>(caf::actor_cast<caf::abstract_actor*>(proxy)))
    p->kill_proxy(nullptr, caf::exit_reason::remote_link_unreachable);
}

}  // namespace

caf::strong_actor_ptr bridge::core::proxy_for(peer_id peer, const std::string& name) {
  caf::strong_actor_ptr result;
  bool dead = false;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = peers.find(peer);
    if (i == peers.end())
      return nullptr;
    auto& entry = i->second;
    auto j = entry.proxies.find(name);
    if (j != entry.proxies.end())
      return j->second;
    caf::actor_config cfg;
    result = caf::make_actor<remote_proxy, caf::strong_actor_ptr>(
      system.next_actor_id(), system.node(), &system, cfg, weak_from_this(), entry.connection,
      name);
    entry.proxies.emplace(name, result);
    dead = entry.closed;
  }
  if (dead)
    kill(result);
  return result;
}

peer_id bridge::core::add(std::shared_ptr<link> l) {
  peer_id id;
  {
    std::lock_guard<std::mutex> guard{mutex};
    id = next_peer++;
    peers[id].connection = l;
  }
  std::weak_ptr<core> weak = weak_from_this();
  l->start(link_handlers{
    [weak, id](std::vector<char>&& frame) {
      if (auto self = weak.lock())
        self->on_frame(id, std::move(frame));
    },
    [weak, id](const std::string& reason) {
      if (auto self = weak.lock())
        self->on_closed(id, reason);
    }});
  return id;
}

void bridge::core::refuse(peer_id peer, const std::string& reason, refuse_reason code) {
  std::shared_ptr<link> connection;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = peers.find(peer);
    if (i == peers.end())
      return;
    connection = i->second.connection;
  }
  log::get("actors")->warn("[bridge {}] refused peer: {}", connection->peer(), reason);
  // Tell the peer why, in our protocol version: a peer of another version can still read
  // the header and will usually print the reason.
  if (auto frame = encode_envelope(system, "bridge", "agent",
                                   caf::make_message(join_refused{reason, code})))
    connection->send(*frame);
  if (refusal_observer)
    refusal_observer(peer_refused{connection->peer(), reason, unix_ms_now()});
  connection->close("refused: " + reason);
}

std::string bridge::core::peer_name(peer_id peer) {
  std::shared_ptr<link> connection;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = peers.find(peer);
    if (i != peers.end())
      connection = i->second.connection;
  }
  return connection ? connection->peer_name() : std::string{};
}

// A message about a node is taken only from the link that node's name came in on (the name
// it announced, and proved the job token under, in the transport's handshake): no peer may
// speak for another node, e.g. evict it with a forged preemption or end its training.
std::optional<std::string> bridge::core::speaks_for_another(peer_id peer,
                                                            const caf::message& body) {
  auto claimed = detail::node_spoken_for(body);
  if (!claimed)
    return std::nullopt;
  std::shared_ptr<link> connection;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = peers.find(peer);
    if (i != peers.end())
      connection = i->second.connection;
  }
  auto name = connection ? connection->peer_name() : std::string{};
  if (name.empty() || name == *claimed)
    return std::nullopt;
  return "a message for node '" + detail::printable(*claimed) + "' from the connection of '" +
         detail::printable(name) + "'";
}

void bridge::core::on_frame(peer_id peer, std::vector<char>&& frame) {
  auto out = decode_frame(frame);
  if (auto* failed = std::get_if<decode_failure>(&out)) {
    refuse(peer, failed->message, failed->code);
    return;
  }
  auto decoded = &std::get<envelope>(out);
  if (auto forged = speaks_for_another(peer, decoded->body)) {
    refuse(peer, *forged, refuse_reason::unauthorized);
    return;
  }
  if (auto why = detail::scheduler_refusal(peer_name(peer), decoded->destination, decoded->body)) {
    refuse(peer, *why, refuse_reason::unauthorized);
    return;
  }
  caf::actor destination;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = published.find(decoded->destination);
    if (i != published.end())
      destination = i->second;
    auto p = peers.find(peer);
    if (p != peers.end())
      p->second.has_spoken = true;
  }
  if (!destination) {
    log::get("actors")->warn("[bridge] message for unknown actor '{}' dropped: {}",
                             decoded->destination, caf::to_string(decoded->body));
    return;
  }
  auto sender = decoded->source.empty() ? nullptr : proxy_for(peer, decoded->source);
  destination->enqueue(caf::make_mailbox_element(std::move(sender), caf::make_message_id(), {},
                                                 std::move(decoded->body)),
                       nullptr);
}

void bridge::core::on_closed(peer_id peer, const std::string& reason) {
  std::vector<caf::strong_actor_ptr> proxies;
  std::string who;
  bool spoken = false;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto i = peers.find(peer);
    if (i == peers.end() || i->second.closed)
      return;
    i->second.closed = true;
    who = i->second.connection->peer();
    spoken = i->second.has_spoken;
    for (auto& [name, proxy] : i->second.proxies)
      proxies.push_back(proxy);
  }
  if (reason.rfind("refused: ", 0) != 0) {
    if (!spoken && reason.find("garbage") != std::string::npos) {
      log::get("actors")->warn("[bridge {}] refused peer: {}", who, reason);
      if (refusal_observer)
        refusal_observer(peer_refused{who, reason, unix_ms_now()});
    } else {
      // Debug: every `sailor status` call closes its link (often as a reset), and a node's
      // loss is reported by the supervisor, which knows what it means.
      log::get("actors")->debug("[bridge {}] link closed: {}", who, reason);
    }
  }
  for (auto& proxy : proxies)
    kill(proxy);
}

bridge::bridge(caf::actor_system& system, comm::transport* transport)
  : core_(std::make_shared<core>(system)) {
  core_->transport = transport;
}

bridge::~bridge() { close(); }

void bridge::publish(const std::string& name, const caf::actor& local) {
  std::lock_guard<std::mutex> guard{core_->mutex};
  core_->published[name] = local;
  core_->names[local.address()] = name;
}

result<std::uint16_t> bridge::listen(const std::string& host, std::uint16_t port) {
  std::weak_ptr<core> weak = core_;
  accept_handler on_accept = [weak](std::shared_ptr<link> l) {
    if (auto self = weak.lock()) {
      log::get("actors")->debug("[bridge] accepted {}", l->peer());
      self->add(std::move(l));
    }
  };
  auto on_refused = [weak](const std::string& peer, const std::string& reason) {
    if (auto self = weak.lock()) {
      std::function<void(const peer_refused&)> observer;
      {
        std::lock_guard<std::mutex> guard{self->mutex};
        observer = self->refusal_observer;
      }
      if (observer)
        observer(peer_refused{peer, reason, unix_ms_now()});
    }
  };
  auto transport = transport_or_default();
  if (!transport)
    return transport.error();
  auto listener = comm_listen(**transport, host, port, on_accept, on_refused);
  if (!listener)
    return listener.error();
  auto bound = (*listener)->port();
  std::lock_guard<std::mutex> guard{core_->mutex};
  core_->listener = std::move(*listener);
  return bound;
}

result<peer_id> bridge::connect(const std::string& host, std::uint16_t port, int timeout_ms) {
  auto transport = transport_or_default();
  if (!transport)
    return transport.error();
  auto l = comm_connect(**transport, host, port, timeout_ms);
  if (!l)
    return l.error();
  return core_->add(std::move(*l));
}

result<comm::transport*> bridge::transport_or_default() {
  std::lock_guard<std::mutex> guard{core_->mutex};
  if (core_->transport)
    return core_->transport;
  auto made = comm::make_tcp_transport(comm::transport_options{});
  if (!made)
    return made.error();
  own_transport_ = std::move(*made);
  core_->transport = own_transport_.get();
  return core_->transport;
}

peer_id bridge::adopt(std::shared_ptr<link> l) { return core_->add(std::move(l)); }

caf::actor bridge::remote_actor(peer_id peer, const std::string& name) {
  return caf::actor_cast<caf::actor>(core_->proxy_for(peer, name));
}

void bridge::on_refused(std::function<void(const peer_refused&)> observer) {
  std::lock_guard<std::mutex> guard{core_->mutex};
  core_->refusal_observer = std::move(observer);
}

void bridge::close() {
  std::unique_ptr<link_listener> listener;
  std::vector<std::shared_ptr<link>> links;
  {
    std::lock_guard<std::mutex> guard{core_->mutex};
    listener = std::move(core_->listener);
    for (auto& [id, entry] : core_->peers)
      links.push_back(entry.connection);
  }
  listener.reset();
  // What the owner sent last (a coordinator's shutdown notices) leaves before the links
  // close: the process may exit right after, and its transport with what is still queued.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{2};
  for (auto& l : links)
    l->flush(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration{})));
  for (auto& l : links)
    l->close("bridge closed");
}

std::size_t bridge::open_peers() const {
  std::lock_guard<std::mutex> guard{core_->mutex};
  std::size_t n = 0;
  for (auto& [id, entry] : core_->peers)
    n += entry.closed ? 0 : 1;
  return n;
}

}  // namespace sailor::actors
