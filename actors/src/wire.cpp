#include "sailor/actors/wire.hpp"

#include <tuple>
#include <utility>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/make_message.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/train/messages.hpp"

namespace sailor::actors {
namespace {

// The wire messages, in kind order. Append only: a kind's number is part of the protocol.
using wire_types =
  std::tuple<join_request, join_accepted, join_refused, heartbeat, role_assignment, stage_ready,
             stage_failed, telemetry, preemption_notice, shutdown_notice, status_request,
             cluster_status, training_job, train_report>;

constexpr std::uint16_t num_kinds = std::tuple_size_v<wire_types>;

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

result<std::vector<char>> encode_envelope(caf::actor_system& system, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body) {
  std::vector<char> buf;
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
  // The kind is the second u16, big-endian as CAF writes integers.
  buf[2] = static_cast<char>(kind >> 8);
  buf[3] = static_cast<char>(kind & 0xff);
  return buf;
}

result<envelope> decode_envelope(caf::actor_system& system, const std::vector<char>& frame) {
  caf::binary_deserializer source{system, frame};
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

std::vector<char> encode_raw_frame(std::uint16_t version, std::uint16_t kind,
                                   const std::string& source, const std::string& destination,
                                   const std::vector<char>& body) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  std::string src = source;
  std::string dst = destination;
  static_cast<void>(sink(version, kind, src, dst));
  buf.insert(buf.end(), body.begin(), body.end());
  return buf;
}

std::uint16_t join_request_kind() { return 0; }

}  // namespace sailor::actors
