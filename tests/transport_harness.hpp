#pragma once
// Shared by the transport conformance tests (transport*.test.cpp): protocol envelopes as
// payloads, patterned buffers, and recorders of what a server, a client and send completions
// saw. Every wait is bounded (wait_s).

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "sailor/protocol/codec.hpp"
#include "transport_support.hpp"

namespace sailor::test {

using namespace sailor::comm;

inline constexpr double wait_s = 20.0;

// Control payloads are protocol envelopes, as the runtime sends them.
inline std::vector<std::byte> encode(const std::string& from, protocol::message m) {
  return protocol::encode(protocol::envelope{protocol::protocol_version, from, "x", std::move(m)});
}
inline std::optional<protocol::envelope> decode(std::span<const std::byte> bytes) {
  auto out = protocol::decode(bytes);
  if (auto* e = std::get_if<protocol::envelope>(&out)) return std::move(*e);
  return std::nullopt;
}

inline comm::transport_options opts(const std::string& name, const std::string& zone = "zone-a") {
  comm::transport_options o;
  o.local_name = name;
  o.local_zone = zone;
  o.connect_timeout_s = 10;
  return o;
}

inline std::vector<std::byte> patterned(std::size_t size, std::uint64_t seed) {
  std::vector<std::byte> v(size);
  for (std::size_t i = 0; i < size; ++i) v[i] = sailor::test::pattern_byte(i, seed);
  return v;
}

inline bool matches(std::span<const std::byte> bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != sailor::test::pattern_byte(i, seed)) return false;
  return true;
}

// A server that records everything it receives, in order.
struct recording_server {
  struct item {
    bool tensor = false;
    std::vector<std::byte> control;
    tensor_descriptor desc;
    payload_buffer payload;
  };
  event_box box;
  std::vector<item> items;
  std::vector<connection_ptr> accepted;
  std::vector<transport_error> errors;
  std::vector<std::pair<address, transport_error>> refusals;  // told by the listener
  std::unique_ptr<listener> lst;

  connection_handlers handlers() {
    connection_handlers h;
    h.on_control = [this](std::vector<std::byte> bytes) {
      box.update([&] { items.push_back({false, std::move(bytes), {}, {}}); });
    };
    h.on_tensor = [this](tensor_descriptor d, payload_buffer p) {
      box.update([&] { items.push_back({true, {}, std::move(d), std::move(p)}); });
    };
    h.on_error = [this](const transport_error& e) { box.update([&] { errors.push_back(e); }); };
    return h;
  }

  void listen(transport& t) {
    auto l = t.listen(
        address{"127.0.0.1", 0},
        [this](const connection_ptr& c) {
          box.update([&] { accepted.push_back(c); });
          return handlers();
        },
        [this](const address& peer, const transport_error& why) {
          box.update([&] { refusals.emplace_back(peer, why); });
        });
    REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : l.error().to_string()));
    lst = std::move(*l);
  }
  std::size_t count() {
    std::lock_guard lock(box.mutex());
    return items.size();
  }
};

struct client_events {
  event_box box;
  bool opened = false;
  std::vector<transport_error> errors;
  connection_handlers handlers() {
    connection_handlers h;
    h.on_open = [this] { box.update([&] { opened = true; }); };
    h.on_error = [this](const transport_error& e) { box.update([&] { errors.push_back(e); }); };
    return h;
  }
  // Waits until the connection opened or failed; returns whether it opened.
  bool outcome() {
    box.wait_for([&] { return opened || !errors.empty(); }, wait_s);
    std::lock_guard lock(box.mutex());
    return opened && errors.empty();
  }
};

// A server of backend `b` that records what it receives, and a client that connected to it
// (its handshake may still be under way). The handler targets are declared first: the
// transports are destroyed before them.
struct client_and_server {
  recording_server server;
  client_events ev;
  std::unique_ptr<transport> server_t;
  std::unique_ptr<transport> client_t;
  connection_ptr conn;

  client_and_server(const backend& b, const transport_options& server_opts,
                    const transport_options& client_opts)
      : server_t(b.make(server_opts)), client_t(b.make(client_opts)) {
    REQUIRE(server_t);
    REQUIRE(client_t);
    server.listen(*server_t);
    auto c = client_t->connect(server.lst->local_address(), ev.handlers());
    REQUIRE(c.ok());
    conn = *c;
  }
};

// Counts completions per send id; a second call for one id is recorded as a defect.
struct completions {
  event_box box;
  std::map<int, int> calls;
  std::map<int, op_status> outcome;
  completion make(int id) {
    return [this, id](const op_status& st) {
      box.update([&] {
        ++calls[id];
        outcome[id] = st;
      });
    };
  }
  bool all_done(int n) {
    return box.wait_for([&] { return static_cast<int>(calls.size()) >= n; }, wait_s);
  }
  int max_calls() {
    std::lock_guard lock(box.mutex());
    int m = 0;
    for (auto& [id, c] : calls) m = std::max(m, c);
    return m;
  }
  int failures() {
    std::lock_guard lock(box.mutex());
    int f = 0;
    for (auto& [id, st] : outcome) f += st.has_value();
    return f;
  }
};


}  // namespace sailor::test
