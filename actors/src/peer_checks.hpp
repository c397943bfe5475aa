#pragma once
// Private: what the bridge and the supervisor check of messages from other processes before
// acting on them: who a message speaks for, and the text a node announces.

#include <optional>
#include <string>

#include <caf/message.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::actors::detail {

/// Longest node name, zone, GPU type or host a node may announce (the protocol's bound, which
/// its messages' size ceilings follow from).
inline constexpr std::size_t max_inventory_text = protocol::wire_bounds::name_bytes;
/// Most devices a node may announce.
inline constexpr std::size_t max_devices_per_node = protocol::wire_bounds::devices_per_node;

/// The node a wire message speaks for (join, heartbeat, stage reports, telemetry,
/// preemption, train reports, rendezvous store requests); nullopt for messages that speak for
/// no node.
std::optional<std::string> node_spoken_for(const caf::message& body);

/// Why a message from the connection named `peer_name` (empty: a link without a handshake)
/// to the actor `destination` is refused: the scheduler's messages (scheduler_messages.hpp)
/// go only to the scheduler gate or a hosted scheduler, the scheduler gate hears only the
/// connection named protocol::scheduler_peer_name, and that connection speaks for no node.
/// nullopt when the message may pass.
std::optional<std::string> scheduler_refusal(const std::string& peer_name,
                                             const std::string& destination,
                                             const caf::message& body);

/// Why a node's inventory is refused (a name, zone, GPU type or host that is not printable
/// UTF-8 of at most max_inventory_text bytes, too many devices); nullopt when it is fine.
std::optional<std::string> inventory_refusal(const node_inventory& inv);

/// `text` with every byte that is not printable UTF-8 replaced by '?', cut to `max` bytes:
/// for putting a peer's text into logs and the status.
std::string printable(const std::string& text, std::size_t max = max_inventory_text);

}  // namespace sailor::actors::detail
