#pragma once
// What the encoder and the decoder share: the schema's namespace and the enum mappings.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <sailor/protocol/schema/messages.capnp.h>

#include "sailor/config/cluster.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/protocol/codec.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::protocol::detail {

namespace s = sailor::protocol::schema;

// Each enum of messages.hpp or config/ next to its schema enum, in one table per enum: the
// encoder and the decoder read the same table, so the two directions cannot disagree.
template <class A, class B>
struct enum_pair {
  A ours;
  B wire;
};

inline constexpr enum_pair<config::dtype, s::Precision> precisions[] = {
  {config::dtype::fp32, s::Precision::FP32},
  {config::dtype::fp16, s::Precision::FP16},
  {config::dtype::bf16, s::Precision::BF16},
};
inline constexpr enum_pair<config::architecture, s::Architecture> architectures[] = {
  {config::architecture::gpt2, s::Architecture::GPT2},
  {config::architecture::opt, s::Architecture::OPT},
  {config::architecture::llama, s::Architecture::LLAMA},
};
inline constexpr enum_pair<config::data_format, s::DataFormat> data_formats[] = {
  {config::data_format::text, s::DataFormat::TEXT},
  {config::data_format::tokens_u16, s::DataFormat::TOKENS_U16},
  {config::data_format::tokens_u32, s::DataFormat::TOKENS_U32},
};
inline constexpr enum_pair<refuse_reason, s::RefuseReason> refuse_reasons[] = {
  {refuse_reason::other, s::RefuseReason::OTHER},
  {refuse_reason::protocol_version, s::RefuseReason::PROTOCOL_VERSION},
  {refuse_reason::invalid_message, s::RefuseReason::INVALID_MESSAGE},
  {refuse_reason::duplicate_node, s::RefuseReason::DUPLICATE_NODE},
  {refuse_reason::unknown_zone, s::RefuseReason::UNKNOWN_ZONE},
  {refuse_reason::shutting_down, s::RefuseReason::SHUTTING_DOWN},
  {refuse_reason::unauthorized, s::RefuseReason::UNAUTHORIZED},
};

template <class A, class B, std::size_t N>
B to_wire(const enum_pair<A, B> (&table)[N], A v) {
  for (auto& p : table)
    if (p.ours == v) return p.wire;
  return table[0].wire;
}

/// False when the peer sent a value this build does not know.
template <class A, class B, std::size_t N>
bool from_wire(const enum_pair<A, B> (&table)[N], B v, A& out) {
  for (auto& p : table)
    if (p.wire == v) {
      out = p.ours;
      return true;
    }
  return false;
}

template <class A, class B>
B to_wire(std::span<const enum_pair<A, B>> table, A v) {
  for (auto& p : table)
    if (p.ours == v) return p.wire;
  return table[0].wire;
}

/// False when the peer sent a value this build does not know.
template <class A, class B>
bool from_wire(std::span<const enum_pair<A, B>> table, B v, A& out) {
  for (auto& p : table)
    if (p.wire == v) {
      out = p.ours;
      return true;
    }
  return false;
}

// A list of the schema as a vector of ours, element by element (T constructed from each).
template <class T, class Reader>
std::vector<T> list_of(Reader r) {
  std::vector<T> out;
  out.reserve(r.size());
  for (auto x : r) out.push_back(T(x));
  return out;
}

// Zone links, in the training job and in the link probes' requests: the constant figures only
// (a bandwidth curve stays behind).
void put_zone_links(capnp::List<s::ZoneLink>::Builder b,
                    const std::vector<config::zone_link>& v);
std::vector<config::zone_link> get_zone_links(capnp::List<s::ZoneLink>::Reader r);

// The parts of codec_write.cpp and codec_read.cpp that codec_scheduler.cpp reuses, and the
// scheduler's messages (scheduler_messages.hpp) that it encodes and decodes.
void put_inventory(s::NodeInventory::Builder b, const node_inventory& v);
void put_plan(s::Plan::Builder b, const config::plan& p);
node_inventory get_inventory(s::NodeInventory::Reader r);
config::plan get_plan(s::Plan::Reader r);

void put_scheduler(s::Envelope::Body::Builder b, const plan_request& v);
void put_scheduler(s::Envelope::Body::Builder b, const plan_reply& v);
void put_scheduler(s::Envelope::Body::Builder b, const availability_event& v);
void put_scheduler(s::Envelope::Body::Builder b, const iteration_telemetry& v);
void put_scheduler(s::Envelope::Body::Builder b, const plan_applied& v);
void put_scheduler(s::Envelope::Body::Builder b, const plan_refused& v);
void put_scheduler(s::Envelope::Body::Builder b, const replan_finished& v);
void put_scheduler(s::Envelope::Body::Builder b, const scheduler_hello& v);
void put_scheduler(s::Envelope::Body::Builder b, const scheduler_request& v);
void put_scheduler(s::Envelope::Body::Builder b, const scheduler_reply& v);
/// The link probes' messages (probe_messages.hpp): codec_probe.cpp.
void put_probe(s::Envelope::Body::Builder b, const link_probe_request& v);
void put_probe(s::Envelope::Body::Builder b, const link_probe_result& v);
std::optional<message> get_probe(s::Envelope::Body::Reader b);
/// One of the scheduler's messages; nothing when `b` holds another.
std::optional<message> get_scheduler(s::Envelope::Body::Reader b);

/// The codec by field lists (codec_fields.hpp): codec_encode.cpp, codec_decode.cpp.
std::vector<std::byte> encode_fields(const envelope& e);
/// The message in `b`, or why this build refuses it; nothing: a variant it does not know.
std::optional<std::variant<message, std::string>> decode_body(s::Envelope::Body::Reader b);

}  // namespace sailor::protocol::detail
