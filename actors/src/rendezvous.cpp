#include "sailor/actors/rendezvous.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "sailor/config/log.hpp"

namespace sailor::actors {

namespace {

using expire_atom = caf::atom_constant<caf::atom("rdvexpire")>;

struct pending_get {
  caf::strong_actor_ptr who;
  std::uint64_t request_id = 0;
  std::int64_t plan_version = 0;
  std::string key;
};

struct stored_value {
  std::vector<char> value;
  std::string node;  // who set it first: only that node may set it again
};

struct server_state {
  rendezvous_limits limits;
  std::map<std::int64_t, std::map<std::string, stored_value>> scopes;
  std::map<std::int64_t, std::set<std::string>> members;  // by scope (require_scope)
  std::map<std::uint64_t, pending_get> waiting;  // by serial
  std::uint64_t next_serial = 1;
  static inline const char* name = "rendezvous_server";
};

using server_actor = caf::stateful_actor<server_state>;

void answer(server_actor* self, const caf::strong_actor_ptr& who, protocol::store_reply reply) {
  if (who)
    self->send(caf::actor_cast<caf::actor>(who), std::move(reply));
}

// Drops scopes older than the newest `keep_versions`; their waiters learn it.
void prune(server_actor* self) {
  auto& st = self->state;
  while (static_cast<int>(st.scopes.size()) > st.limits.keep_versions) {
    const auto dropped = st.scopes.begin()->first;
    st.scopes.erase(st.scopes.begin());
    st.members.erase(st.members.begin(), st.members.upper_bound(dropped));
    for (auto i = st.waiting.begin(); i != st.waiting.end();) {
      if (i->second.plan_version <= dropped) {
        answer(self, i->second.who,
               {i->second.request_id, false, {},
                "plan version " + std::to_string(i->second.plan_version) + " is no longer current"});
        i = st.waiting.erase(i);
      } else {
        ++i;
      }
    }
  }
}

std::string refusal(const server_state& st, const protocol::store_request& r) {
  if (r.key.empty() || r.key.size() > st.limits.max_key_bytes)
    return "key of " + std::to_string(r.key.size()) + " bytes (1 to " +
           std::to_string(st.limits.max_key_bytes) + " allowed)";
  if (r.value.size() > st.limits.max_value_bytes)
    return "value of " + std::to_string(r.value.size()) + " bytes (at most " +
           std::to_string(st.limits.max_value_bytes) + ")";
  if (!st.scopes.empty() && r.plan_version + st.limits.keep_versions <= st.scopes.rbegin()->first)
    return "plan version " + std::to_string(r.plan_version) + " is no longer current";
  if (st.limits.require_scope) {
    auto m = st.members.find(r.plan_version);
    if (m == st.members.end())
      return "plan version " + std::to_string(r.plan_version) + " has no rendezvous open";
    if (!m->second.count(r.node))
      return "node '" + r.node.substr(0, 256) + "' has no rank in plan version " +
             std::to_string(r.plan_version);
  }
  return {};
}

void on_set(server_actor* self, protocol::store_request& r) {
  auto& st = self->state;
  auto& scope = st.scopes[r.plan_version];
  if (scope.size() >= st.limits.max_keys_per_scope && !scope.count(r.key)) {
    log::get("actors")->warn("[rendezvous v{}] set '{}' refused: {} keys already", r.plan_version,
                             r.key, scope.size());
    return;
  }
  if (auto old = scope.find(r.key); old != scope.end() && old->second.node != r.node) {
    log::get("actors")->warn("[rendezvous v{}] set '{}' by node '{}' refused: node '{}' set it",
                             r.plan_version, r.key.substr(0, 64), r.node.substr(0, 64),
                             old->second.node);
    return;
  }
  for (auto i = st.waiting.begin(); i != st.waiting.end();) {
    if (i->second.plan_version == r.plan_version && i->second.key == r.key) {
      answer(self, i->second.who, {i->second.request_id, true, r.value, {}});
      i = st.waiting.erase(i);
    } else {
      ++i;
    }
  }
  scope[r.key] = stored_value{std::move(r.value), r.node};
  prune(self);
}

void on_get(server_actor* self, protocol::store_request& r) {
  auto& st = self->state;
  auto who = self->current_sender();
  auto scope = st.scopes.find(r.plan_version);
  if (scope != st.scopes.end()) {
    auto v = scope->second.find(r.key);
    if (v != scope->second.end()) {
      answer(self, who, {r.request_id, true, v->second.value, {}});
      return;
    }
  }
  if (st.waiting.size() >= st.limits.max_waiters) {
    answer(self, who, {r.request_id, false, {}, "too many pending gets"});
    return;
  }
  const auto serial = st.next_serial++;
  st.waiting[serial] = pending_get{who, r.request_id, r.plan_version, r.key};
  const auto wait = std::chrono::milliseconds{std::max<std::int64_t>(1, r.timeout_ms)};
  self->delayed_send(self, wait, expire_atom::value, serial);
}

caf::behavior rendezvous_server(server_actor* self, rendezvous_limits limits) {
  self->state.limits = limits;
  return {
    [self](const store_scope& x) {
      // The supervisor opens the scope of a plan it assigns.
      auto& st = self->state;
      const auto version = x.plan_version;
      st.members[version] = {x.nodes.begin(), x.nodes.end()};
      st.scopes[version];
      prune(self);
    },
    [self](protocol::store_request& r) {
      if (auto why = refusal(self->state, r); !why.empty()) {
        log::get("actors")->warn("[rendezvous v{}] request for '{}' refused: {}", r.plan_version,
                                 r.key.substr(0, 64), why);
        if (!r.set)
          answer(self, self->current_sender(), {r.request_id, false, {}, why});
        return;
      }
      if (r.set)
        on_set(self, r);
      else
        on_get(self, r);
    },
    [self](expire_atom, std::uint64_t serial) {
      auto i = self->state.waiting.find(serial);
      if (i == self->state.waiting.end())
        return;
      answer(self, i->second.who, {i->second.request_id, false, {}, "timed out"});
      self->state.waiting.erase(i);
    },
  };
}

// The scope of one plan version, as Gloo's store adapter sees it.
class scoped_store final : public comm::rendezvous_store {
public:
  scoped_store(std::shared_ptr<rendezvous_client> client, std::int64_t version)
      : client_(std::move(client)), version_(version) {}
  status set(const std::string& key, const std::vector<char>& value) override {
    return client_->set(version_, key, value);
  }
  result<std::vector<char>> get(const std::string& key,
                                std::chrono::milliseconds timeout) override {
    return client_->get(version_, key, timeout);
  }

private:
  std::shared_ptr<rendezvous_client> client_;
  std::int64_t version_;
};

}  // namespace

caf::actor spawn_rendezvous_server(caf::actor_system& system, rendezvous_limits limits) {
  return system.spawn(rendezvous_server, limits);
}

struct rendezvous_client::impl {
  caf::actor server;
  std::string node;
  caf::actor receiver;
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::uint64_t, std::optional<protocol::store_reply>> pending;
  std::uint64_t next_id = 1;
  bool closed = false;
};

std::shared_ptr<rendezvous_client> rendezvous_client::start(
    caf::actor_system& system, caf::actor server,
    const std::function<void(const std::string&, const caf::actor&)>& publish, std::string node) {
  std::shared_ptr<rendezvous_client> client{new rendezvous_client};
  client->impl_ = std::make_unique<impl>();
  client->impl_->server = std::move(server);
  client->impl_->node = std::move(node);
  std::weak_ptr<rendezvous_client> weak = client;
  client->impl_->receiver = system.spawn([weak]() -> caf::behavior {
    return {[weak](protocol::store_reply& r) {
      if (auto c = weak.lock())
        c->deliver(std::move(r));
    }};
  });
  publish(reply_name, client->impl_->receiver);
  return client;
}

rendezvous_client::~rendezvous_client() { close(); }

void rendezvous_client::close() {
  caf::actor receiver;
  {
    std::lock_guard lock{impl_->mutex};
    impl_->closed = true;
    receiver = std::exchange(impl_->receiver, caf::actor{});
  }
  impl_->arrived.notify_all();
  if (receiver)
    caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
}

std::shared_ptr<comm::rendezvous_store> rendezvous_client::scope(std::int64_t plan_version) {
  return std::make_shared<scoped_store>(shared_from_this(), plan_version);
}

status rendezvous_client::set(std::int64_t plan_version, const std::string& key,
                              const std::vector<char>& value) {
  caf::actor receiver;
  {
    std::lock_guard lock{impl_->mutex};
    receiver = impl_->receiver;
  }
  if (!receiver)
    return sailor::error::disconnected("rendezvous: the node is stopping");
  protocol::store_request r{0, plan_version, key, true, value, 0,
                        impl_->node};
  caf::send_as(receiver, impl_->server, std::move(r));
  return {};
}

result<std::vector<char>> rendezvous_client::get(std::int64_t plan_version,
                                                 const std::string& key,
                                                 std::chrono::milliseconds timeout) {
  std::uint64_t id;
  caf::actor receiver;
  {
    std::lock_guard lock{impl_->mutex};
    id = impl_->next_id++;
    impl_->pending[id];
    receiver = impl_->receiver;
  }
  if (!receiver)
    return sailor::error::disconnected("rendezvous: the node is stopping");
  protocol::store_request r{id, plan_version, key, false, {},
                        timeout.count(), impl_->node};
  caf::send_as(receiver, impl_->server, std::move(r));
  // The server answers by the deadline; the margin covers the round trip. Past it the
  // coordinator is unreachable.
  const auto margin = std::chrono::milliseconds{2000};
  std::unique_lock lock{impl_->mutex};
  const bool answered = impl_->arrived.wait_for(lock, timeout + margin, [this, id] {
    return impl_->pending[id].has_value() || impl_->closed;
  });
  auto reply = std::move(impl_->pending[id]);
  impl_->pending.erase(id);
  if (!answered || !reply)
    return sailor::error::disconnected("rendezvous: no answer from the coordinator for '" + key +
                                       "'");
  if (!reply->found)
    return sailor::error::failed("rendezvous: '" + key + "' of plan version " +
                                 std::to_string(plan_version) + ": " + reply->error);
  return std::move(reply->value);
}

void rendezvous_client::deliver(protocol::store_reply reply) {
  {
    std::lock_guard lock{impl_->mutex};
    auto i = impl_->pending.find(reply.request_id);
    if (i == impl_->pending.end())
      return;  // its waiter gave up
    i->second = std::move(reply);
  }
  impl_->arrived.notify_all();
}

}  // namespace sailor::actors
