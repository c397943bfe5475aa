#include "handshake.hpp"

#include <cstring>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <sailor/comm/schema/transport.capnp.h>

#include "auth.hpp"

namespace sailor::comm::detail {
namespace {

namespace s = sailor::comm::schema;

capnp::Data::Reader data_of(const std::vector<std::byte>& v) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size());
}

std::vector<std::byte> bytes_of(capnp::Data::Reader d) {
  std::vector<std::byte> out(d.size());
  if (d.size()) std::memcpy(out.data(), d.begin(), d.size());
  return out;
}

std::vector<std::byte> to_bytes(capnp::MessageBuilder& mb) {
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.begin(), chars.size());
  return out;
}

// `f` of the root of the message in `bytes`, read as a `Root`; a transport error when the bytes
// are not such a message (`what` names it).
template <class R, class Root, class F>
std::variant<R, transport_error> read(std::span<const std::byte> bytes, const char* what, F&& f) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    return transport_error{errc::invalid_message,
                           std::string(what) + " of " + std::to_string(bytes.size()) +
                               " bytes is not a Cap'n Proto message"};
  try {
    auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 64 * 1024;
    opts.nestingLimit = 8;
    capnp::FlatArrayMessageReader reader(words, opts);
    return f(reader.getRoot<Root>());
  } catch (const kj::Exception& e) {
    return transport_error{errc::invalid_message,
                           std::string(what) + " does not decode: " + e.getDescription().cStr()};
  }
}

}  // namespace

std::vector<std::byte> encode_hello(const hello& h) {
  capnp::MallocMessageBuilder mb;
  auto b = mb.initRoot<s::Hello>();
  b.setMagic(hello_magic);
  b.setProtocolVersion(h.version);
  b.setName(h.name);
  b.setZone(h.zone);
  if (!h.nonce.empty()) b.setNonce(data_of(h.nonce));
  return to_bytes(mb);
}

std::variant<hello, transport_error> decode_hello(std::span<const std::byte> bytes) {
  return read<hello, s::Hello>(bytes, "hello", [](s::Hello::Reader r)
                                                   -> std::variant<hello, transport_error> {
    if (r.getMagic() != hello_magic)
      return transport_error{errc::invalid_message, "hello has a wrong magic number"};
    return hello{r.getProtocolVersion(), r.getName(), r.getZone(), bytes_of(r.getNonce())};
  });
}

std::vector<std::byte> encode_hello_reply(const hello_reply& h) {
  capnp::MallocMessageBuilder mb;
  auto b = mb.initRoot<s::HelloReply>();
  b.setAccepted(h.accepted);
  b.setReason(h.reason);
  b.setProtocolVersion(h.version);
  b.setName(h.name);
  b.setZone(h.zone);
  if (!h.nonce.empty()) b.setNonce(data_of(h.nonce));
  if (!h.proof.empty()) b.setProof(data_of(h.proof));
  return to_bytes(mb);
}

std::variant<hello_reply, transport_error> decode_hello_reply(std::span<const std::byte> bytes) {
  return read<hello_reply, s::HelloReply>(bytes, "hello reply", [](s::HelloReply::Reader r)
                                                     -> std::variant<hello_reply, transport_error> {
    return hello_reply{r.getAccepted(), r.getReason(), r.getProtocolVersion(), r.getName(),
                       r.getZone(),     bytes_of(r.getNonce()), bytes_of(r.getProof())};
  });
}

std::optional<transport_error> check_hello(const hello& h, bool token_required) {
  for (const std::string* field : {&h.name, &h.zone})
    if (field->size() > max_peer_name_bytes || !is_printable_utf8(*field))
      return transport_error{errc::invalid_message,
                             "a peer announced a name or zone that is not printable UTF-8 of at "
                             "most " + std::to_string(max_peer_name_bytes) + " bytes"};
  if (h.version != protocol_version)
    return transport_error{errc::protocol_mismatch,
                           "peer '" + h.name + "' speaks protocol version " +
                               std::to_string(h.version) + ", this side speaks " +
                               std::to_string(protocol_version)};
  if (token_required && h.nonce.size() != nonce_bytes)
    return transport_error{errc::refused, "peer '" + h.name +
                                              "' holds no job token, and this side requires one "
                                              "(--token-file or SAILOR_TOKEN)"};
  return std::nullopt;
}

std::vector<std::byte> encode_tensor_header(const tensor_descriptor& d) {
  capnp::MallocMessageBuilder mb;
  auto h = mb.initRoot<s::TensorHeader>();
  h.setDtype(static_cast<s::DType>(static_cast<std::uint16_t>(d.type)));
  auto shape = h.initShape(static_cast<unsigned>(d.shape.size()));
  for (unsigned i = 0; i < d.shape.size(); ++i) shape.set(i, d.shape[i]);
  h.setTag(d.tag);
  h.setName(d.name);
  h.setBytes(d.bytes);
  return to_bytes(mb);
}

std::variant<tensor_descriptor, transport_error> decode_tensor_header(
    std::span<const std::byte> bytes) {
  return read<tensor_descriptor, s::TensorHeader>(bytes, "tensor header", [](s::TensorHeader::Reader h)
                                     -> std::variant<tensor_descriptor, transport_error> {
    auto t = static_cast<std::uint16_t>(h.getDtype());
    if (t > static_cast<std::uint16_t>(dtype::u8))
      return transport_error{errc::invalid_message, "tensor header has unknown dtype " +
                                                      std::to_string(t)};
    tensor_descriptor d;
    d.type = static_cast<dtype>(t);
    for (auto x : h.getShape()) d.shape.push_back(x);
    d.tag = h.getTag();
    d.name = h.getName();
    d.bytes = h.getBytes();
    return d;
  });
}

}  // namespace sailor::comm::detail
