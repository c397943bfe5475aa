#include "sailor/actors/wire.hpp"

#include <cstring>
#include <optional>
#include <span>

#include <caf/make_message.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/probe_messages.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/train_messages.hpp"
#include "sailor/protocol/codec.hpp"

namespace sailor::actors {
namespace {

// The protocol message a CAF message holds, if it holds one: tries each alternative.
template <std::size_t I = 0>
std::optional<protocol::message> to_protocol(const caf::message& m) {
  if constexpr (I == std::variant_size_v<protocol::message>) {
    return std::nullopt;
  } else {
    using T = std::variant_alternative_t<I, protocol::message>;
    if (m.match_elements<T>())
      return protocol::message{m.get_as<T>(0)};
    return to_protocol<I + 1>(m);
  }
}

}  // namespace

result<std::vector<char>> encode_envelope_as_version(std::uint16_t version,
                                                     const std::string& source,
                                                     const std::string& destination,
                                                     const caf::message& body) {
  auto m = to_protocol(body);
  if (!m)
    return sailor::error::unimplemented("not a wire message: " + caf::to_string(body));
  auto bytes = protocol::encode(protocol::envelope{version, source, destination, std::move(*m)});
  std::vector<char> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

result<std::vector<char>> encode_envelope(caf::actor_system&, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body) {
  return encode_envelope_as_version(protocol_version, source, destination, body);
}

std::variant<envelope, decode_failure> decode_frame(const std::vector<char>& frame) {
  auto bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(frame.data()),
                                          frame.size());
  auto decoded = protocol::decode(bytes);
  if (auto* err = std::get_if<protocol::decode_error>(&decoded)) {
    auto code = err->what == protocol::decode_error::kind::version_mismatch
                  ? protocol::refuse_reason::protocol_version
                  : protocol::refuse_reason::invalid_message;
    return decode_failure{code, err->message};
  }
  auto& e = std::get<protocol::envelope>(decoded);
  envelope out{e.version, std::move(e.sender), std::move(e.destination), {}};
  std::visit([&](auto& x) { out.body = caf::make_message(std::move(x)); }, e.body);
  return out;
}

result<envelope> decode_envelope(caf::actor_system&, const std::vector<char>& frame) {
  auto out = decode_frame(frame);
  if (auto* failed = std::get_if<decode_failure>(&out))
    return sailor::error::invalid_input("", failed->message);
  return std::move(std::get<envelope>(out));
}

}  // namespace sailor::actors
