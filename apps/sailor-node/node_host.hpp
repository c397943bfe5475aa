#pragma once
/// What a sailor-node learns of the machine it runs on: the address peers reach it on, its
/// devices, its state folder and the checkpoint shards that folder holds.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/protocol/limits.hpp"
#include "sailor/protocol/messages.hpp"

namespace sailor::node {

/// The address of this machine's interface that routes to host:port (a UDP socket connected
/// there: nothing is sent). Empty when the host does not resolve or no route exists.
std::string local_address_towards(const std::string& host, std::uint16_t port);

/// The address peers reach this node on: `advertise` (--advertise) when given, or the
/// interface towards the coordinator at host:port. The error names --advertise.
result<std::string> advertised_address(const std::string& advertise, const std::string& host,
                                       std::uint16_t port);

/// The checkpoint shards under `state_dir` (relative paths), at most `limit`, each within the
/// protocol's path bound; corrupt shards are left out with a warning.
std::vector<std::string> held_shards(const std::string& state_dir,
                                     std::size_t limit = protocol::wire_bounds::shards_per_node);

/// `state_dir` (--state-dir), made if missing (0700); the error names it. Without one: a
/// node given a --name keeps its state in CACHE/NAME (Sailor's cache folder, files.hpp); an
/// unnamed one (named HOST-PID, a new name each run) in the first of CACHE/node-HOST-K,
/// K = 0, 1, ..., that no running node holds, which it holds (a lock) until it exits: the same
/// folder, with its checkpoints, run after run, and as many folders as nodes ran at once.
result<std::string> make_state_dir(const std::string& state_dir, const std::string& name, bool named);

/// Devices from "cpu:N", "cuda:N" or "cuda:all"; sets `default_type` (CPU or GPU).
result<std::vector<protocol::device_info>> parse_devices(const std::string& text, std::string& default_type);

/// This machine's host name.
std::string host_name();

}  // namespace sailor::node
