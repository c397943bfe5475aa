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
// encoder and the decoder read the same table, so the two directions cannot disagree. The
// protocol's own enums carry their names here too (to_string); config's have theirs in config.
template <class A, class B>
struct enum_pair {
  A ours;
  B wire;
  const char* name = nullptr;
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
inline constexpr enum_pair<config::tokenizer_kind, s::TokenizerKind> tokenizer_kinds[] = {
  {config::tokenizer_kind::characters, s::TokenizerKind::CHARACTERS},
  {config::tokenizer_kind::gpt2_bpe, s::TokenizerKind::GPT2_BPE},
  {config::tokenizer_kind::sentencepiece, s::TokenizerKind::SENTENCEPIECE},
};
inline constexpr enum_pair<config::outer_optimizer_kind, s::OuterOptimizer> outer_optimizers[] = {
  {config::outer_optimizer_kind::nesterov, s::OuterOptimizer::NESTEROV},
  {config::outer_optimizer_kind::sgd, s::OuterOptimizer::SGD},
};
inline constexpr enum_pair<config::delta_compression, s::DeltaCompression> delta_compressions[] = {
  {config::delta_compression::none, s::DeltaCompression::NONE},
  {config::delta_compression::int8, s::DeltaCompression::INT8},
};
inline constexpr enum_pair<availability_kind, s::AvailabilityKind> availability_kinds[] = {
  {availability_kind::joined, s::AvailabilityKind::JOINED, "joined"},
  {availability_kind::preemption_notice, s::AvailabilityKind::PREEMPTION_NOTICE, "preemption_notice"},
  {availability_kind::lost, s::AvailabilityKind::LOST, "lost"},
};
inline constexpr enum_pair<shutdown_kind, s::ShutdownKind> shutdown_kinds[] = {
  {shutdown_kind::released, s::ShutdownKind::RELEASED, "released"},
  {shutdown_kind::job_finished, s::ShutdownKind::JOB_FINISHED, "job_finished"},
  {shutdown_kind::stopped, s::ShutdownKind::STOPPED, "stopped"},
  {shutdown_kind::declared_lost, s::ShutdownKind::DECLARED_LOST, "declared_lost"},
};
inline constexpr enum_pair<placement_kind, s::PlacementKind> placement_kinds[] = {
  {placement_kind::pin, s::PlacementKind::PIN, "pin"},
  {placement_kind::forbid, s::PlacementKind::FORBID, "forbid"},
  {placement_kind::clear, s::PlacementKind::CLEAR, "clear"},
};
inline constexpr enum_pair<scheduler_command, s::SchedulerCommand> scheduler_commands[] = {
  {scheduler_command::replan_now, s::SchedulerCommand::REPLAN_NOW, "replan_now"},
  {scheduler_command::drain_node, s::SchedulerCommand::DRAIN_NODE, "drain_node"},
  {scheduler_command::evict_node, s::SchedulerCommand::EVICT_NODE, "evict_node"},
  {scheduler_command::pin, s::SchedulerCommand::PIN, "pin"},
  {scheduler_command::forbid, s::SchedulerCommand::FORBID, "forbid"},
  {scheduler_command::clear, s::SchedulerCommand::CLEAR, "clear"},
  {scheduler_command::objective_change, s::SchedulerCommand::OBJECTIVE_CHANGE, "objective_change"},
};
inline constexpr enum_pair<refuse_reason, s::RefuseReason> refuse_reasons[] = {
  {refuse_reason::other, s::RefuseReason::OTHER, "other"},
  {refuse_reason::protocol_version, s::RefuseReason::PROTOCOL_VERSION, "protocol_version"},
  {refuse_reason::invalid_message, s::RefuseReason::INVALID_MESSAGE, "invalid_message"},
  {refuse_reason::duplicate_node, s::RefuseReason::DUPLICATE_NODE, "duplicate_node"},
  {refuse_reason::unknown_zone, s::RefuseReason::UNKNOWN_ZONE, "unknown_zone"},
  {refuse_reason::shutting_down, s::RefuseReason::SHUTTING_DOWN, "shutting_down"},
  {refuse_reason::unauthorized, s::RefuseReason::UNAUTHORIZED, "unauthorized"},
};

/// The name of `v` in its table; `unknown` for a value the table lacks.
template <class A, class B, std::size_t N>
const char* name_in(const enum_pair<A, B> (&table)[N], A v, const char* unknown) {
  for (auto& p : table)
    if (p.ours == v) return p.name;
  return unknown;
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

}  // namespace sailor::protocol::detail
