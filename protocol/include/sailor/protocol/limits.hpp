#pragma once
/// Ceilings on the encoded size of each message kind.
///
/// decode() reads a message's kind (the tag of the envelope's union, one word) and refuses
/// the message when its bytes are over that kind's ceiling, before it reads any field: a
/// heartbeat is a few hundred bytes, so a "heartbeat" of megabytes is refused as such rather
/// than decoded. The transport already bounds every control frame (16 MiB by default,
/// `comm::transport_options::max_control_bytes`) before it allocates; these ceilings are
/// tighter, one per kind.
///
/// Each ceiling is computed, not chosen: the largest legal message of its kind (every text at
/// its bound, every list at its count below, in the schema's own struct layouts) times two,
/// because Cap'n Proto's builder may leave the end of a segment unused when the next object
/// does not fit, plus the segment table. A unit test encodes that largest message of every
/// kind and checks it decodes. Two kinds grow with the job rather than with fixed bounds (a
/// training job lists the cluster's zone links and the plan's peers and restore files; a
/// cluster status lists every node, event and validation point): their ceiling is the
/// control frame's, and only the coordinator sends them.

#include <cstddef>
#include <string>

namespace sailor::protocol {

/// What one message may hold at most; the ceilings follow from these.
namespace wire_bounds {
/// A node name, zone, GPU type, host, address or device kind (the bridge refuses an
/// inventory with longer ones: actors/src/peer_checks.hpp).
inline constexpr std::size_t name_bytes = 256;
/// An actor's name: a role and a name ("zone:" + a zone's name).
inline constexpr std::size_t actor_name_bytes = 2 * name_bytes;
/// A reason or an error, for people. The encoder cuts a longer one (at a UTF-8 boundary):
/// an exception's text with its context is a few KiB.
inline constexpr std::size_t reason_bytes = 16 * 1024;
/// A short word of the protocol (a phase, an optimizer's name).
inline constexpr std::size_t word_bytes = 64;
/// A path on a node (PATH_MAX).
inline constexpr std::size_t path_bytes = 4096;
/// A checkpoint shard a node offers, relative to its state folder: Sailor's own layout
/// (checkpoints/JOB/vPLAN/iter-N/shard-....ckpt) under a job name of at most name_bytes.
inline constexpr std::size_t shard_path_bytes = 2 * name_bytes;
/// Shards a node offers when it joins (sailor-node offers no more).
inline constexpr std::size_t shards_per_node = 4096;
/// Devices a node may announce (actors/src/peer_checks.hpp).
inline constexpr std::size_t devices_per_node = 4096;
/// Stages of a plan: the simulator's limit (simulator::resolved_plan::max_stages).
inline constexpr std::size_t plan_stages = 64;
/// Devices one plan spans. With every name at its bound, a role assignment with such a plan
/// encodes to about 7 MiB, and twice that for segment slack fits the 16 MiB control frame.
/// (Sailor's evaluated plans span hundreds of GPUs.)
inline constexpr std::size_t plan_devices = 8192;
/// DiLoCo's regions in a plan, and the zones they name together.
inline constexpr std::size_t plan_regions = 64;
inline constexpr std::size_t plan_zones = 1024;
/// A rendezvous key and value (actors::rendezvous_limits).
inline constexpr std::size_t store_key_bytes = 1024;
inline constexpr std::size_t store_value_bytes = std::size_t{1} << 20;
/// The control frame's limit (comm::transport_options::max_control_bytes by default): the
/// ceiling of the kinds that grow with the job.
/// Sizes in a link probe's bandwidth curve (link_probe_result), at most.
inline constexpr std::size_t probe_sizes = 64;
inline constexpr std::size_t control_frame_bytes = std::size_t{16} << 20;
}  // namespace wire_bounds

/// Kinds of message: as many as `message` has alternatives.
inline constexpr std::size_t message_kinds = 28;

/// The most bytes an encoded envelope holding a message of kind `kind` (its index in
/// `message`, as `message::index()` gives it) may take; 0 for a kind this build does not know.
std::size_t max_encoded_bytes(std::size_t kind);

/// The name of kind `kind` ("heartbeat"), as name_of() gives it; "unknown" past the last.
const char* kind_name(std::size_t kind);

/// `text` cut to at most `max` bytes, at a UTF-8 character boundary, for fields the sender
/// fills with text for people (reasons, errors).
std::string clip_text(const std::string& text, std::size_t max);

}  // namespace sailor::protocol
