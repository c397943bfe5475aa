#pragma once
// What the encoder and the decoder share: the schema's namespace and the enum mappings.

#include <span>

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
inline constexpr enum_pair<availability_kind, s::AvailabilityKind> availability_kinds[] = {
  {availability_kind::joined, s::AvailabilityKind::JOINED},
  {availability_kind::preemption_notice, s::AvailabilityKind::PREEMPTION_NOTICE},
  {availability_kind::lost, s::AvailabilityKind::LOST},
};
inline constexpr enum_pair<placement_kind, s::PlacementKind> placement_kinds[] = {
  {placement_kind::pin, s::PlacementKind::PIN},
  {placement_kind::forbid, s::PlacementKind::FORBID},
  {placement_kind::clear, s::PlacementKind::CLEAR},
};
inline constexpr enum_pair<scheduler_command, s::SchedulerCommand> scheduler_commands[] = {
  {scheduler_command::replan_now, s::SchedulerCommand::REPLAN_NOW},
  {scheduler_command::drain_node, s::SchedulerCommand::DRAIN_NODE},
  {scheduler_command::evict_node, s::SchedulerCommand::EVICT_NODE},
  {scheduler_command::pin, s::SchedulerCommand::PIN},
  {scheduler_command::forbid, s::SchedulerCommand::FORBID},
  {scheduler_command::clear, s::SchedulerCommand::CLEAR},
  {scheduler_command::objective_change, s::SchedulerCommand::OBJECTIVE_CHANGE},
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

}  // namespace sailor::protocol::detail
