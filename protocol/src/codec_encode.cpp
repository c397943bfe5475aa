// The encoder: each message struct into its schema struct by the one field list of its type
// (codec_fields.hpp), through Cap'n Proto's reflection (capnp/dynamic.h).

#include <algorithm>
#include <cstring>
#include <utility>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "codec_fields.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol {
namespace {

using namespace detail;

// Where a value goes: a field of a struct, or an element of a list.
struct field_slot {
  capnp::DynamicStruct::Builder b;
  kj::StringPtr name;
  void set(const capnp::DynamicValue::Reader& x) { b.set(name, x); }
  capnp::DynamicStruct::Builder init() { return b.init(name).as<capnp::DynamicStruct>(); }
  capnp::DynamicList::Builder init(unsigned n) { return b.init(name, n).as<capnp::DynamicList>(); }
};
struct element_slot {
  capnp::DynamicList::Builder list;
  unsigned i;
  void set(const capnp::DynamicValue::Reader& x) { list.set(i, x); }
  capnp::DynamicStruct::Builder init() { return list[i].as<capnp::DynamicStruct>(); }
  capnp::DynamicList::Builder init(unsigned n) { return list.init(i, n).as<capnp::DynamicList>(); }
};

// The visitor fields() calls: each member into its field of `b`.
struct writer {
  capnp::DynamicStruct::Builder b;

  template <class T>
  writer& operator()(kj::StringPtr name, const T& v) {
    put(field_slot{b, name}, v);
    return *this;
  }

  template <class T>
  static void write(capnp::DynamicStruct::Builder b, const T& v) {
    writer w{b};
    fields(w, v);
  }

  template <class Slot, class T>
    requires std::is_arithmetic_v<T>
  static void put(Slot s, T v) {
    s.set(v);
  }
  template <class Slot>
  static void put(Slot s, const std::string& v) {
    s.set(capnp::Text::Reader(v.c_str(), v.size()));
  }
  template <class Slot>
  static void put(Slot s, const std::vector<char>& v) {
    s.set(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size()));
  }
  template <class Slot, mapped T>
  static void put(Slot s, const T& v) {
    write(s.init(), v);
  }
  template <class Slot, class T>
  static void put(Slot s, const std::vector<T>& v) {
    put_list(s, v, v.size());
  }
  template <class Slot, class T>
  static void put(Slot s, const std::optional<T>& v) {
    if (v) put(s, *v);
  }

  // The adapters of codec_fields.hpp.
  template <class Slot, class S>
  static void put(Slot s, clipped<S> c) {
    put(s, clip_text(c.text, c.max));
  }
  template <class Slot, class V>
  static void put(Slot s, bounded<V> l) {
    put_list(s, l.list, std::min(l.list.size(), l.max));
  }
  template <class Slot, class A, class B, class M>
  static void put(Slot s, wire_enum<A, B, M> e) {
    const auto wire = static_cast<std::uint16_t>(to_wire(e.table, e.value));
    s.set(capnp::DynamicEnum(capnp::Schema::from<B>(), wire));
  }
  template <class Slot, class O>
  static void put(Slot s, presence<O> p) {
    s.set(p.optional.has_value());
  }
  template <class Slot, class V>
  static void put(Slot s, place_list<V> p) {
    capnp::DynamicList::Builder list = s.init(static_cast<unsigned>(p.roles.size()));
    for (unsigned i = 0; i < p.roles.size(); ++i)
      write(list[i].as<capnp::DynamicStruct>(), role_place{p.roles[i]});
  }

  // The first n elements of v.
  template <class Slot, class T>
  static void put_list(Slot s, const std::vector<T>& v, std::size_t n) {
    capnp::DynamicList::Builder list = s.init(static_cast<unsigned>(n));
    for (unsigned i = 0; i < n; ++i) put(element_slot{list, i}, v[i]);
  }
};

std::uint16_t discriminant(const capnp::StructSchema::Field& f) {
  return f.getProto().getDiscriminantValue();
}

}  // namespace

const char* name_of(const message& m) { return kind_name(m.index()); }

const char* to_string(refuse_reason r) {
  return name_in(refuse_reasons, r, "other");
}

const char* to_string(availability_kind k) {
  return name_in(availability_kinds, k, "unknown");
}

const char* to_string(shutdown_kind k) {
  return name_in(shutdown_kinds, k, "unknown");
}

const char* to_string(placement_kind k) {
  return name_in(placement_kinds, k, "unknown");
}

const char* to_string(scheduler_command c) {
  return name_in(scheduler_commands, c, "unknown");
}

// Each placement rule's kind and the scheduler request that carries it.
constexpr std::pair<placement_kind, scheduler_command> rule_commands[] = {
  {placement_kind::pin, scheduler_command::pin},
  {placement_kind::forbid, scheduler_command::forbid},
  {placement_kind::clear, scheduler_command::clear},
};

std::optional<scheduler_command> command_for(placement_kind k) {
  for (const auto& [rule, command] : rule_commands)
    if (rule == k) return command;
  return std::nullopt;
}

std::optional<placement_kind> placement_of(scheduler_command c) {
  for (const auto& [rule, command] : rule_commands)
    if (command == c) return rule;
  return std::nullopt;
}

std::vector<std::byte> encode(const envelope& e) {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<s::Envelope>();
  root.setProtocolVersion(e.version);
  root.setSender(e.sender);
  root.setDestination(e.destination);
  // The body's union lists the messages in the order of `message`.
  auto body = capnp::toDynamic(root.initBody());
  for (auto field : body.getSchema().getUnionFields()) {
    if (discriminant(field) != e.body.index()) continue;
    auto x = body.init(field).as<capnp::DynamicStruct>();
    std::visit([&x](const auto& v) { writer::write(x, v); }, e.body);
  }
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.begin(), chars.size());
  return out;
}

}  // namespace sailor::protocol
