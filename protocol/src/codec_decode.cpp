// The decoder: each schema struct back into its message struct by the one field list of its
// type (codec_fields.hpp), through Cap'n Proto's reflection (capnp/dynamic.h); then what the
// schema cannot check: enum values this build knows, roles inside their plan.

#include <cstring>
#include <optional>
#include <utility>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "codec_fields.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol {
namespace {

using namespace detail;


// After a struct is read: what its fields say together.

/// The roles of an assignment are places in its plan: the rest of each role comes from there.
std::optional<std::string> settle(role_assignment& a) {
  const auto& plan = a.plan;
  for (auto& role : a.roles) {
    const int stage = role.stage, replica = role.replica;
    if (stage < 0 || stage >= plan.num_stages() || replica < 0 ||
        replica >= static_cast<int>(plan.stages[stage].replicas.size()))
      return "role (stage " + std::to_string(stage) + ", replica " + std::to_string(replica) +
             ") is not in the plan it came with";
    auto& st = plan.stages[stage];
    auto& rep = st.replicas[replica];
    role = stage_role{a.plan_version,   stage,       replica,           role.tp_rank,
                      rep.tp,           role.device, st.first_layer,    st.num_layers,
                      plan.micro_batch, plan.num_stages(), rep.gpu_type, rep.zone};
  }
  return std::nullopt;
}

// A refusal inside these names where it is.
std::string refusal_in(const config::model_shape& m, const std::string& why) {
  return "model '" + m.name + "' has " + why;
}
std::string refusal_in(const config::data_source&, const std::string& why) {
  return "training job: " + why;
}

// The visitor fields() calls: each member from its field of `r`. `refused` keeps the first
// thing this build cannot accept (empty: none).
struct reader {
  capnp::DynamicStruct::Reader r;
  std::string& refused;

  template <class T>
  reader& operator()(kj::StringPtr name, T&& v) {
    get(r.get(name), v);
    return *this;
  }

  template <class T>
  static void read(capnp::DynamicStruct::Reader from, T&& v, std::string& refused) {
    const bool was_refused = !refused.empty();
    reader inner{from, refused};
    fields(inner, v);
    if constexpr (requires { settle(v); })
      if (refused.empty())
        if (auto why = settle(v)) refused = std::move(*why);
    if constexpr (requires { refusal_in(v, refused); })
      if (!was_refused && !refused.empty()) refused = refusal_in(v, refused);
  }

  template <class T>
    requires std::is_arithmetic_v<T>
  void get(const capnp::DynamicValue::Reader& x, T& v) {
    v = x.as<T>();
  }
  void get(const capnp::DynamicValue::Reader& x, std::string& v) {
    auto text = x.as<capnp::Text>();
    v.assign(text.begin(), text.size());
  }
  void get(const capnp::DynamicValue::Reader& x, std::vector<char>& v) {
    auto data = x.as<capnp::Data>();
    const auto* bytes = reinterpret_cast<const char*>(data.begin());
    v.assign(bytes, bytes + data.size());
  }
  template <mapped T>
  void get(const capnp::DynamicValue::Reader& x, T& v) {
    read(x.as<capnp::DynamicStruct>(), v, refused);
  }
  template <class T>
  void get(const capnp::DynamicValue::Reader& x, std::vector<T>& v) {
    auto list = x.as<capnp::DynamicList>();
    v.assign(list.size(), T{});
    for (unsigned i = 0; i < list.size(); ++i) get(list[i], v[i]);
  }
  template <class T>
  void get(const capnp::DynamicValue::Reader& x, std::optional<T>& v) {
    if (v) get(x, *v);  // there when its presence said so
  }

  // The adapters of codec_fields.hpp.
  template <class S>
  void get(const capnp::DynamicValue::Reader& x, clipped<S> c) {
    get(x, c.text);
  }
  template <class V>
  void get(const capnp::DynamicValue::Reader& x, bounded<V> l) {
    get(x, l.list);
  }
  template <class A, class B, class M>
  void get(const capnp::DynamicValue::Reader& x, wire_enum<A, B, M> e) {
    const auto raw = x.as<capnp::DynamicEnum>().getRaw();
    if (from_wire(e.table, static_cast<B>(raw), e.value)) return;
    e.value = e.table[0].ours;
    if (e.what && refused.empty())
      refused = "unknown " + std::string(e.what) + " " + std::to_string(raw);
  }
  template <class O>
  void get(const capnp::DynamicValue::Reader& x, presence<O> p) {
    if (x.as<bool>())
      p.optional.emplace();
    else
      p.optional.reset();
  }
  template <class V>
  void get(const capnp::DynamicValue::Reader& x, place_list<V> p) {
    auto list = x.as<capnp::DynamicList>();
    p.roles.assign(list.size(), {});
    for (unsigned i = 0; i < list.size(); ++i)
      read(list[i].as<capnp::DynamicStruct>(), role_place<stage_role>{p.roles[i]}, refused);
  }
};

// The alternative of `message` at `index`, default-constructed.
template <std::size_t... I>
message alternative(std::size_t index, std::index_sequence<I...>) {
  static constexpr message (*make[])() = {+[] { return message{std::in_place_index<I>}; }...};
  return make[index]();
}

/// The message in `b`, or why this build refuses it; nothing: a variant it does not know.
std::optional<std::variant<message, std::string>> get(s::Envelope::Body::Reader b) {
  auto body = capnp::toDynamic(b);
  KJ_IF_MAYBE (field, body.which()) {
    const std::size_t index = field->getProto().getDiscriminantValue();
    if (index >= std::variant_size_v<message>) return std::nullopt;
    auto m = alternative(index, std::make_index_sequence<std::variant_size_v<message>>{});
    std::string refused;
    auto from = body.get(*field).as<capnp::DynamicStruct>();
    std::visit([&](auto& v) { reader::read(from, v, refused); }, m);
    if (!refused.empty()) return refused;
    return m;
  }
  return std::nullopt;  // a variant this build does not know
}

decode_error invalid(std::string what) {
  return decode_error{decode_error::kind::invalid, std::move(what)};
}

// A message over its kind's ceiling is refused before any of its fields is read.
std::optional<decode_error> over_limit(s::Envelope::Reader root, std::size_t size) {
  const auto kind = static_cast<std::size_t>(root.getBody().which());
  const auto limit = max_encoded_bytes(kind);
  if (limit == 0 || size <= limit) return std::nullopt;  // an unknown kind is refused below
  return invalid("a " + std::string(kind_name(kind)) + " of " + std::to_string(size) +
                 " bytes, over its limit of " + std::to_string(limit) + " bytes");
}

std::variant<envelope, decode_error> read(s::Envelope::Reader root, std::size_t size) {
  if (auto too_big = over_limit(root, size)) return *too_big;
  envelope e;
  e.version = root.getProtocolVersion();
  e.sender = root.getSender();
  e.destination = root.getDestination();
  if (e.version != protocol_version)
    return decode_error{decode_error::kind::version_mismatch,
                        "message from '" + e.sender + "' speaks protocol version " +
                          std::to_string(e.version) + ", this build speaks " +
                          std::to_string(protocol_version)};
  auto body = get(root.getBody());
  if (!body)
    return invalid("message from '" + e.sender + "' has unknown variant " +
                   std::to_string(static_cast<unsigned>(root.getBody().which())) +
                   " (a newer peer?)");
  if (auto* why = std::get_if<std::string>(&*body))
    return invalid("message from '" + e.sender + "': " + *why);
  e.body = std::move(std::get<message>(*body));
  if (e.destination.empty())
    return invalid("message " + std::string(name_of(e.body)) + " from '" + e.sender +
                   "' names no destination actor");
  return e;
}

}  // namespace

std::variant<envelope, decode_error> decode(std::span<const std::byte> bytes) {
  if (bytes.empty()) return invalid("empty message");
  if (bytes.size() % sizeof(capnp::word) != 0)
    return invalid("message of " + std::to_string(bytes.size()) +
                   " bytes is not a whole number of 8-byte words");
  try {
    // Cap'n Proto reads words: copy into aligned storage.
    auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 64 * 1024 * 1024;
    capnp::FlatArrayMessageReader reader(words, opts);
    return read(reader.getRoot<s::Envelope>(), bytes.size());
  } catch (const kj::Exception& e) {
    return invalid(std::string("does not decode: ") + e.getDescription().cStr());
  }
}

}  // namespace sailor::protocol
