// Each kind's ceiling: the largest legal message of the kind, in the schema's own layouts.

#include "sailor/protocol/limits.hpp"

#include <array>
#include <variant>

#include "codec_internal.hpp"
#include "sailor/protocol/codec.hpp"

namespace sailor::protocol {
namespace {

using namespace detail;
namespace b = wire_bounds;

constexpr std::size_t word = 8;
constexpr std::size_t words(std::size_t bytes) { return (bytes + word - 1) / word * word; }

// A struct's data and pointer sections (its lists and texts are counted where they are set).
template <class T>
constexpr std::size_t struct_bytes() {
  return word * (T::_capnpPrivate::dataWordSize + T::_capnpPrivate::pointerCount);
}
// A text of n bytes: its bytes and the NUL, in whole words.
constexpr std::size_t text(std::size_t n) { return words(n + 1); }
constexpr std::size_t data(std::size_t n) { return words(n); }
// A list of n structs: the tag word and the elements.
template <class T>
constexpr std::size_t struct_list(std::size_t n) {
  return word + n * struct_bytes<T>();
}
// A list of n texts of up to len bytes: a pointer and a text each.
constexpr std::size_t text_list(std::size_t n, std::size_t len) { return n * (word + text(len)); }
constexpr std::size_t int32_list(std::size_t n) { return words(4 * n); }

// The envelope around every message: the segment table (a few segments), the root pointer,
// the envelope struct and both actor names.
constexpr std::size_t envelope_bytes =
  16 * word + word + struct_bytes<s::Envelope>() + 2 * text(b::actor_name_bytes);

constexpr std::size_t role_bytes = struct_bytes<s::StageRole>() + 2 * text(b::name_bytes);

// A plan of plan_stages stages over plan_devices devices; one device per replica is the
// largest (each replica repeats its GPU type and zone).
constexpr std::size_t plan_bytes =
  struct_bytes<s::Plan>() + struct_bytes<s::PlanEstimate>() +
  struct_list<s::StagePlan>(b::plan_stages) + b::plan_stages * word /* replica list tags */ +
  b::plan_devices * (struct_bytes<s::Replica>() + 2 * text(b::name_bytes) +
                     text_list(1, b::name_bytes) + int32_list(1)) +
  // DiLoCo's regions, each named, and their zones.
  struct_bytes<s::LocalSgd>() + struct_list<s::LocalSgdRegion>(b::plan_regions) +
  b::plan_regions * (text(b::name_bytes) + word /* zone list tag */) + text_list(b::plan_zones, b::name_bytes);

constexpr std::size_t inventory_bytes =
  struct_bytes<s::NodeInventory>() + 4 * text(b::name_bytes) + text(b::name_bytes) /* address */ +
  struct_list<s::Device>(b::devices_per_node) + b::devices_per_node * text(b::name_bytes) +
  text_list(b::shards_per_node, b::shard_path_bytes);

// The largest legal body of each kind, in the order of `message`; 0: grows with the job.
constexpr std::array<std::size_t, message_kinds> body_bytes = {
  struct_bytes<s::JoinRequest>() + inventory_bytes,
  struct_bytes<s::JoinAccepted>() + text(b::name_bytes) + text(b::actor_name_bytes),
  struct_bytes<s::JoinRefused>() + text(b::reason_bytes),
  struct_bytes<s::Heartbeat>() + text(b::name_bytes),
  // Roles carry their place only; the plan travels beside them.
  struct_bytes<s::RoleAssignment>() + struct_list<s::StageRole>(b::devices_per_node) + plan_bytes,
  struct_bytes<s::StageReady>() + text(b::name_bytes) + role_bytes,
  struct_bytes<s::StageFailed>() + text(b::name_bytes) + role_bytes + text(b::reason_bytes),
  struct_bytes<s::PreemptionNotice>() + text(b::name_bytes) + text(b::reason_bytes),
  struct_bytes<s::ShutdownNotice>() + text(b::reason_bytes),
  struct_bytes<s::StatusRequest>(),
  0,  // cluster_status: every node, event and validation point of the job
  0,  // training_job: the cluster's zone links, the plan's peers and restore files
  struct_bytes<s::TrainReport>() + 2 * text(b::name_bytes) /* node, blamed node */ +
    text(b::reason_bytes) + text(b::path_bytes) + text(b::word_bytes),
  struct_bytes<s::StoreRequest>() + text(b::store_key_bytes) + data(b::store_value_bytes) +
    text(b::name_bytes),
  struct_bytes<s::StoreReply>() + data(b::store_value_bytes) + text(b::reason_bytes),
  // A scheduler in its own process.
  0,  // plan_request: every joined node and the current plan (from the coordinator)
  struct_bytes<s::PlanReply>() + plan_bytes + text(b::reason_bytes),
  struct_bytes<s::AvailabilityEvent>() + inventory_bytes + text(b::reason_bytes),
  struct_bytes<s::IterationTelemetry>() + text(b::name_bytes),
  struct_bytes<s::PlanApplied>() + plan_bytes + text(b::name_bytes),
  struct_bytes<s::PlanRefused>() + text(b::reason_bytes),
  struct_bytes<s::ReplanFinished>() + text(b::reason_bytes),
  struct_bytes<s::SchedulerHello>() + text(b::name_bytes),
  struct_bytes<s::SchedulerRequest>() + text(b::name_bytes) +
    text(b::reason_bytes) + text(b::name_bytes) /* key */ + text(b::reason_bytes) /* value */,
  struct_bytes<s::SchedulerReply>() + text(b::reason_bytes),
  // Link probes between nodes.
  0,  // link_probe_request: the cluster's zone links
  struct_bytes<s::LinkProbeResult>() + 2 * text(b::name_bytes) /* node, address */ +
    text(b::reason_bytes) + 2 * (word + word * b::probe_sizes) /* sizes and rates */,
  // Training, added after the above.
  struct_bytes<s::CheckpointKept>() + text(b::path_bytes),
};

constexpr std::array<const char*, message_kinds> names = {
  "join_request", "join_accepted",  "join_refused", "heartbeat",    "role_assignment",
  "stage_ready",  "stage_failed",   "preemption_notice", "shutdown_notice", "status_request",
  "cluster_status", "training_job", "train_report", "store_request", "store_reply",
  "plan_request", "plan_reply", "availability_event", "iteration_telemetry", "plan_applied",
  "plan_refused", "replan_finished", "scheduler_hello", "scheduler_request", "scheduler_reply",
  "link_probe_request", "link_probe_result", "checkpoint_kept",
};

static_assert(message_kinds == std::variant_size_v<message>);

}  // namespace

std::size_t max_encoded_bytes(std::size_t kind) {
  if (kind >= message_kinds) return 0;
  if (body_bytes[kind] == 0) return b::control_frame_bytes;
  // Twice the content: the builder may leave a segment's end unused when an object does not
  // fit it, and starts the next segment at least as large as all before it.
  return 2 * (envelope_bytes + body_bytes[kind]);
}

const char* kind_name(std::size_t kind) { return kind < message_kinds ? names[kind] : "unknown"; }

std::string clip_text(const std::string& text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t end = max;
  // Back off continuation bytes (10xxxxxx) so that no character is cut in two.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace sailor::protocol
