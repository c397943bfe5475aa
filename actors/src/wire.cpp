#include "sailor/actors/wire.hpp"

#include <cstring>
#include <optional>
#include <span>
#include <tuple>
#include <variant>
#include <utility>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/make_message.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/train/messages.hpp"
#include "sailor/comm/messages.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::actors {
namespace {

// The wire messages, in kind order. Append only: a kind's number is part of the protocol.
using wire_types =
  std::tuple<join_request, join_accepted, join_refused, heartbeat, role_assignment, stage_ready,
             stage_failed, telemetry, preemption_notice, shutdown_notice, status_request,
             cluster_status, training_job, train_report>;

constexpr std::uint16_t num_kinds = std::tuple_size_v<wire_types>;

// First byte of a frame: which encoding follows.
constexpr char capnp_tag = 'C';  // the comm module's Cap'n Proto envelope
constexpr char caf_tag = 'A';    // CAF's binary serializer, for what the schema lacks

sailor::error wire_error(error_kind kind, std::string message) {
  return sailor::error{kind, std::move(message), "", 0, ""};
}

template <std::size_t... Is>
bool encode_body(caf::binary_serializer& sink, const caf::message& body, std::uint16_t& kind,
                 caf::error& err, std::index_sequence<Is...>) {
  bool found = false;
  auto try_one = [&](auto index) {
    using type = std::tuple_element_t<decltype(index)::value, wire_types>;
    if (found || !body.match_elements<type>())
      return;
    found = true;
    kind = static_cast<std::uint16_t>(decltype(index)::value);
    auto copy = body.get_as<type>(0);
    err = sink(copy);
  };
  (try_one(std::integral_constant<std::size_t, Is>{}), ...);
  return found;
}

template <std::size_t... Is>
caf::error decode_body(caf::binary_deserializer& source, std::uint16_t kind, caf::message& out,
                       std::index_sequence<Is...>) {
  caf::error err;
  auto try_one = [&](auto index) {
    using type = std::tuple_element_t<decltype(index)::value, wire_types>;
    if (kind != decltype(index)::value)
      return;
    type value;
    err = source(value);
    if (!err)
      out = caf::make_message(std::move(value));
  };
  (try_one(std::integral_constant<std::size_t, Is>{}), ...);
  return err;
}

}  // namespace

static result<std::vector<char>> encode_caf(caf::actor_system& system, const std::string& source,
                                     const std::string& destination, const caf::message& body) {
  std::vector<char> buf{caf_tag};
  caf::binary_serializer sink{system, buf};
  std::uint16_t version = protocol_version;
  std::uint16_t kind = 0;
  // Header first with a placeholder kind, patched below once the body type is known.
  std::string src = source;
  std::string dst = destination;
  if (auto err = sink(version, kind, src, dst))
    return wire_error(error_kind::failed, "cannot encode envelope header");
  caf::error err;
  if (!encode_body(sink, body, kind, err, std::make_index_sequence<num_kinds>{}))
    return wire_error(error_kind::unimplemented,
                      "not a wire message: " + caf::to_string(body));
  if (err)
    return wire_error(error_kind::failed, "cannot encode " + caf::to_string(body) + ": " +
                                            system.render(err));
  // The kind is the second u16 after the tag, big-endian as CAF writes integers.
  buf[3] = static_cast<char>(kind >> 8);
  buf[4] = static_cast<char>(kind & 0xff);
  return buf;
}

static result<envelope> decode_caf(caf::actor_system& system, const std::vector<char>& frame) {
  caf::binary_deserializer source{system, caf::as_bytes(caf::make_span(frame.data() + 1, frame.size() - 1))};
  envelope out;
  std::uint16_t kind = 0;
  if (source(out.version, kind))
    return wire_error(error_kind::invalid_input, "truncated envelope header");
  if (out.version != protocol_version)
    return wire_error(error_kind::invalid_input,
                      "protocol version " + std::to_string(out.version) + ", expected " +
                        std::to_string(protocol_version));
  if (source(out.source, out.destination))
    return wire_error(error_kind::invalid_input, "truncated envelope names");
  if (kind >= num_kinds)
    return wire_error(error_kind::invalid_input, "unknown message kind " + std::to_string(kind));
  if (auto err = decode_body(source, kind, out.body, std::make_index_sequence<num_kinds>{}))
    return wire_error(error_kind::invalid_input,
                      "malformed message of kind " + std::to_string(kind) + ": " +
                        system.render(err));
  if (source.remaining() != 0)
    return wire_error(error_kind::invalid_input,
                      std::to_string(source.remaining()) + " trailing bytes after message");
  return out;
}

// -- Cap'n Proto, through the comm module's envelope -----------------------------------------
//
// The comm schema has no destination field: the receiving actor follows from the message
// (to the supervisor: join, stage ready, telemetry, preemption, heartbeat; to the node's
// agent: accept, refusal, role assignment, shutdown). Fields our messages have and the schema
// lacks: a device's kind (cpu/cuda), the heartbeat timeout and the zone actor's name (sent in
// join_accept's `coordinator`); role details are rebuilt from the plan the assignment carries.

namespace {

std::vector<char> to_chars(const std::vector<std::byte>& bytes) {
  std::vector<char> out(bytes.size() + 1);
  out[0] = capnp_tag;
  std::memcpy(out.data() + 1, bytes.data(), bytes.size());
  return out;
}

comm::node_inventory to_comm(const node_inventory& x) {
  comm::node_inventory out{x.name, x.host, x.zone, "", {}};
  for (auto& d : x.devices)
    out.devices.push_back(comm::device_info{d.index, x.gpu_type, d.memory_bytes});
  return out;
}

node_inventory from_comm(const comm::node_inventory& x) {
  node_inventory out{x.node_id, x.zone, "", x.host, {}};
  for (auto& d : x.devices) {
    out.gpu_type = d.gpu_type;
    out.devices.push_back(device_info{d.index, "", d.memory_bytes});
  }
  return out;
}

comm::role to_comm(const std::string& node, const stage_role& r) {
  return comm::role{r.stage, r.replica, r.tp_rank, node, r.device};
}

// The comm body for a message, if the schema has it.
std::optional<comm::message_body> to_comm_body(const caf::message& m) {
  if (m.match_elements<join_request>())
    return comm::join_request{to_comm(m.get_as<join_request>(0).inventory)};
  if (m.match_elements<join_accepted>()) {
    auto& x = m.get_as<join_accepted>(0);
    return comm::join_accept{x.node, x.zone_actor, x.heartbeat_interval_ms / 1000.0};
  }
  if (m.match_elements<join_refused>())
    return comm::refusal{comm::refuse_reason::other, m.get_as<join_refused>(0).reason};
  if (m.match_elements<heartbeat>()) {
    auto& x = m.get_as<heartbeat>(0);
    return comm::heartbeat{x.node, x.seq, 0};
  }
  if (m.match_elements<role_assignment>()) {
    auto& x = m.get_as<role_assignment>(0);
    comm::role_assignment out;
    out.plan_epoch = static_cast<std::uint64_t>(x.plan_version);
    out.plan = x.plan;
    for (auto& r : x.roles) {
      // The node of a role is the one of its replica's rank in the placed plan.
      std::string node;
      if (r.stage < x.plan.num_stages() &&
          r.replica < static_cast<int>(x.plan.stages[r.stage].replicas.size())) {
        auto& rep = x.plan.stages[r.stage].replicas[r.replica];
        if (r.tp_rank < static_cast<int>(rep.nodes.size()))
          node = rep.nodes[r.tp_rank];
      }
      out.roles.push_back(to_comm(node, r));
    }
    return out;
  }
  if (m.match_elements<stage_ready>()) {
    auto& x = m.get_as<stage_ready>(0);
    return comm::stage_ready{static_cast<std::uint64_t>(x.role.plan_version), to_comm(x.node, x.role)};
  }
  if (m.match_elements<telemetry>()) {
    auto& x = m.get_as<telemetry>(0);
    comm::iteration_telemetry out;
    out.iteration = x.iteration;
    out.where = comm::role{x.stage, x.replica, 0, x.node, 0};
    out.iteration_s = x.iteration_s;
    return out;
  }
  if (m.match_elements<preemption_notice>()) {
    auto& x = m.get_as<preemption_notice>(0);
    return comm::preemption_notice{x.node, 0, x.reason};
  }
  if (m.match_elements<shutdown_notice>())
    return comm::shutdown_notice{m.get_as<shutdown_notice>(0).reason};
  return std::nullopt;
}

sailor::error bad(std::string message) {
  return sailor::error{error_kind::invalid_input, std::move(message), "", 0, ""};
}

// Our message, and the actor it is for, from a comm body.
result<std::pair<std::string, caf::message>> from_comm_body(comm::message_body&& body,
                                                            std::uint16_t version) {
  using out_t = std::pair<std::string, caf::message>;
  if (auto* x = std::get_if<comm::join_request>(&body))
    return out_t{"supervisor", caf::make_message(join_request{version, from_comm(x->inventory)})};
  if (auto* x = std::get_if<comm::join_accept>(&body)) {
    auto interval_ms = static_cast<std::int64_t>(x->heartbeat_interval_s * 1000.0 + 0.5);
    return out_t{"agent", caf::make_message(join_accepted{x->node_id, x->coordinator, interval_ms, 0})};
  }
  if (auto* x = std::get_if<comm::refusal>(&body))
    return out_t{"agent", caf::make_message(join_refused{x->detail})};
  if (auto* x = std::get_if<comm::heartbeat>(&body))
    return out_t{"supervisor", caf::make_message(heartbeat{x->node_id, x->sequence})};
  if (auto* x = std::get_if<comm::role_assignment>(&body)) {
    role_assignment out;
    out.plan_version = static_cast<std::int64_t>(x->plan_epoch);
    out.plan = x->plan;
    for (auto& r : x->roles) {
      if (r.stage < 0 || r.stage >= out.plan.num_stages() || r.replica < 0 ||
          r.replica >= static_cast<int>(out.plan.stages[r.stage].replicas.size()))
        return bad("role (stage " + std::to_string(r.stage) + ", replica " +
                   std::to_string(r.replica) + ") is not in the plan it came with");
      auto& stage = out.plan.stages[r.stage];
      auto& rep = stage.replicas[r.replica];
      out.roles.push_back(stage_role{out.plan_version, r.stage, r.replica, r.tp_rank, rep.tp,
                                     r.device, stage.first_layer, stage.num_layers,
                                     out.plan.micro_batch, out.plan.num_stages(), rep.gpu_type,
                                     rep.zone});
    }
    return out_t{"agent", caf::make_message(std::move(out))};
  }
  if (auto* x = std::get_if<comm::stage_ready>(&body)) {
    stage_role role;
    role.plan_version = static_cast<std::int64_t>(x->plan_epoch);
    role.stage = x->where.stage;
    role.replica = x->where.replica;
    role.tp_rank = x->where.tp_rank;
    role.device = x->where.device;
    return out_t{"supervisor", caf::make_message(stage_ready{x->where.node_id, role})};
  }
  if (auto* x = std::get_if<comm::iteration_telemetry>(&body))
    return out_t{"supervisor", caf::make_message(telemetry{x->where.node_id, x->where.stage,
                                                           x->where.replica, x->iteration,
                                                           x->iteration_s})};
  if (auto* x = std::get_if<comm::preemption_notice>(&body))
    return out_t{"supervisor", caf::make_message(preemption_notice{x->node_id, x->reason})};
  if (auto* x = std::get_if<comm::shutdown_notice>(&body))
    return out_t{"agent", caf::make_message(shutdown_notice{x->reason})};
  return bad("a message this build does not route");
}

}  // namespace

result<std::vector<char>> encode_envelope(caf::actor_system& system, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body) {
  if (auto b = to_comm_body(body)) {
    comm::envelope e;
    e.version = comm::protocol_version;
    e.sender = source;
    e.body = std::move(*b);
    return to_chars(comm::encode(e));
  }
  return encode_caf(system, source, destination, body);
}

result<envelope> decode_envelope(caf::actor_system& system, const std::vector<char>& frame) {
  if (frame.empty())
    return bad("empty frame");
  if (frame[0] == caf_tag)
    return decode_caf(system, frame);
  if (frame[0] != capnp_tag)
    return bad("unknown frame tag (not a sailor envelope)");
  auto bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(frame.data() + 1),
                                          frame.size() - 1);
  auto decoded = comm::decode_envelope(bytes);
  if (auto* err = std::get_if<comm::transport_error>(&decoded))
    return bad(err->message);
  auto& e = std::get<comm::envelope>(decoded);
  if (e.version != protocol_version)
    return bad("protocol version " + std::to_string(e.version) + ", expected " +
               std::to_string(protocol_version));
  auto routed = from_comm_body(std::move(e.body), static_cast<std::uint16_t>(e.version));
  if (!routed)
    return routed.error();
  envelope out;
  out.version = static_cast<std::uint16_t>(e.version);
  out.source = e.sender;
  out.destination = std::move(routed->first);
  out.body = std::move(routed->second);
  return out;
}

std::vector<char> encode_raw_frame(std::uint16_t version, std::uint16_t kind,
                                   const std::string& source, const std::string& destination,
                                   const std::vector<char>& body) {
  std::vector<char> buf{caf_tag};
  caf::binary_serializer sink{nullptr, buf};
  std::string src = source;
  std::string dst = destination;
  static_cast<void>(sink(version, kind, src, dst));
  buf.insert(buf.end(), body.begin(), body.end());
  return buf;
}

std::uint16_t join_request_kind() { return 0; }

}  // namespace sailor::actors
