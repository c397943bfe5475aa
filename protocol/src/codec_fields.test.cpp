// The field lists (codec_fields.hpp) against the schema: every field of every schema struct a
// message reaches is mapped, once, every mapped name is in the schema, and every member has
// the schema's type. A field added to messages.capnp without its mapping fails here.

#include "codec_fields.hpp"

#include <doctest/doctest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include <capnp/schema.h>

using namespace sailor::protocol;
using namespace sailor::protocol::detail;
namespace sch = capnp::schema;

namespace {

// Walks a field list next to its schema struct; `problems` collects what does not match.
struct checker {
  capnp::StructSchema schema;
  std::string where;
  std::vector<std::string>& problems;
  std::set<std::string> seen{};

  template <class T>
  checker& operator()(kj::StringPtr name, T&& v) {
    const std::string path = where + "." + name.cStr();
    if (!seen.insert(name.cStr()).second) problems.push_back(path + " is mapped twice");
    KJ_IF_MAYBE (field, schema.findFieldByName(name)) {
      expect(field->getType(), v, path);
    } else {
      problems.push_back(path + " is not in the schema");
    }
    return *this;
  }

  /// `v`'s field list against `s`; complete: every field of `s` must be in it.
  template <class T>
  static void walk(capnp::StructSchema s, T&& v, const std::string& where,
                   std::vector<std::string>& problems, bool complete = true) {
    checker c{s, where, problems};
    fields(c, v);
    if (!complete) return;
    for (auto field : s.getFields()) {
      std::string name = field.getProto().getName();
      if (!c.seen.count(name)) problems.push_back(where + "." + name + " is not mapped");
    }
  }

  void want(bool ok, const std::string& path, capnp::Type t) {
    if (!ok)
      problems.push_back(path + ": the schema's type (" +
                         std::to_string(static_cast<int>(t.which())) + ") is not the member's");
  }

  template <class T>
    requires std::is_arithmetic_v<T>
  void expect(capnp::Type t, T&, const std::string& path) {
    sch::Type::Which w;
    if constexpr (std::is_same_v<T, bool>)
      w = sch::Type::BOOL;
    else if constexpr (std::is_floating_point_v<T>)
      w = sizeof(T) == 8 ? sch::Type::FLOAT64 : sch::Type::FLOAT32;
    else if constexpr (std::is_signed_v<T>)
      w = sizeof(T) == 1 ? sch::Type::INT8 : sizeof(T) == 2 ? sch::Type::INT16
          : sizeof(T) == 4 ? sch::Type::INT32 : sch::Type::INT64;
    else
      w = sizeof(T) == 1 ? sch::Type::UINT8 : sizeof(T) == 2 ? sch::Type::UINT16
          : sizeof(T) == 4 ? sch::Type::UINT32 : sch::Type::UINT64;
    want(t.which() == w, path, t);
  }
  void expect(capnp::Type t, std::string&, const std::string& path) { want(t.isText(), path, t); }
  void expect(capnp::Type t, std::vector<char>&, const std::string& path) {
    want(t.isData(), path, t);
  }
  template <mapped T>
  void expect(capnp::Type t, T& v, const std::string& path) {
    want(t.isStruct(), path, t);
    if (t.isStruct()) walk(t.asStruct(), v, path, problems);
  }
  template <class T>
  void expect(capnp::Type t, std::vector<T>&, const std::string& path) {
    want(t.isList(), path, t);
    T element{};
    if (t.isList()) expect(t.asList().getElementType(), element, path + "[]");
  }
  template <class T>
  void expect(capnp::Type t, std::optional<T>&, const std::string& path) {
    T value{};
    expect(t, value, path);
  }
  template <class S>
  void expect(capnp::Type t, clipped<S> c, const std::string& path) {
    expect(t, c.text, path);
  }
  template <class V>
  void expect(capnp::Type t, bounded<V> l, const std::string& path) {
    expect(t, l.list, path);
  }
  template <class A, class B, class M>
  void expect(capnp::Type t, wire_enum<A, B, M>, const std::string& path) {
    want(t.isEnum() && t.asEnum() == capnp::Schema::from<B>(), path, t);
  }
  template <class O>
  void expect(capnp::Type t, presence<O>, const std::string& path) {
    want(t.isBool(), path, t);
  }
  template <class V>
  void expect(capnp::Type t, place_list<V>, const std::string& path) {
    want(t.isList() && t.asList().getElementType().isStruct(), path, t);
    stage_role role;
    if (t.isList() && t.asList().getElementType().isStruct())  // a place: some fields only
      walk(t.asList().getElementType().asStruct(), role_place<stage_role>{role}, path + "[]",
           problems, false);
  }
};

template <std::size_t... I>
std::vector<message> every_kind(std::index_sequence<I...>) {
  return {message{std::in_place_index<I>}...};
}

// join_request: joinRequest
std::string camel_case(const std::string& snake) {
  std::string out;
  for (std::size_t i = 0; i < snake.size(); ++i)
    out += snake[i] == '_' && i + 1 < snake.size() ? static_cast<char>(std::toupper(snake[++i]))
                                                    : snake[i];
  return out;
}

// Every alternative of `message` against its member of the envelope's union (in the same
// order, of the same name).
std::vector<std::string> problems_of_every_message() {
  std::vector<std::string> problems;
  auto body = capnp::Schema::from<schema::Envelope::Body>();
  auto all = every_kind(std::make_index_sequence<std::variant_size_v<message>>{});
  if (body.getUnionFields().size() != all.size())
    problems.push_back("the envelope's union has " +
                       std::to_string(body.getUnionFields().size()) + " members, `message` " +
                       std::to_string(all.size()));
  for (auto field : body.getUnionFields()) {
    const auto index = field.getProto().getDiscriminantValue();
    if (index >= all.size()) continue;
    if (camel_case(name_of(all[index])) != field.getProto().getName().cStr())
      problems.push_back(std::string("Envelope.") + field.getProto().getName().cStr() +
                         " holds a " + name_of(all[index]));
    std::visit(
      [&](auto& v) {
        checker::walk(field.getType().asStruct(), v,
                      std::string("Envelope.") + field.getProto().getName().cStr(), problems);
      },
      all[index]);
  }
  return problems;
}

// A list that forgot a field, named one wrong, and gave one the wrong type.
struct heartbeat_missing_seq {
  std::string node;
};
struct heartbeat_misnamed {
  std::string node;
  std::uint64_t seq = 0;
};
struct heartbeat_mistyped {
  std::string node;
  std::int32_t seq = 0;
};
void fields(auto& f, heartbeat_missing_seq& v) { f("node", v.node); }
void fields(auto& f, heartbeat_misnamed& v) { f("node", v.node)("sequence", v.seq); }
void fields(auto& f, heartbeat_mistyped& v) { f("node", v.node)("seq", v.seq); }

template <class T>
std::vector<std::string> problems_of() {
  std::vector<std::string> problems;
  T v;
  checker::walk(capnp::Schema::from<schema::Heartbeat>(), v, "Heartbeat", problems);
  return problems;
}

}  // namespace

TEST_CASE("protocol: every field of every schema struct a message reaches is mapped, once") {
  auto problems = problems_of_every_message();
  for (auto& p : problems) FAIL_CHECK(p);
  CHECK(problems.empty());
}

TEST_CASE("protocol: the field check names a field left out, a wrong name and a wrong type") {
  CHECK(problems_of<heartbeat_missing_seq>() ==
        std::vector<std::string>{"Heartbeat.seq is not mapped"});
  CHECK(problems_of<heartbeat_misnamed>() ==
        std::vector<std::string>{"Heartbeat.sequence is not in the schema",
                                 "Heartbeat.seq is not mapped"});
  CHECK(camel_case("link_probe_result") == "linkProbeResult");
  auto mistyped = problems_of<heartbeat_mistyped>();
  REQUIRE(mistyped.size() == 1);
  CHECK(mistyped[0].find("Heartbeat.seq: the schema's type") == 0);
}
