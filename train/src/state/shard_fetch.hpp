#pragma once
// Private to the shard client (shard_client.cpp, shard_memory.cpp): one shard fetched from
// its holders as the buffers it arrived in. No LibTorch here.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sailor/comm/tensor.hpp"
#include "sailor/train/shard_service.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/config/error.hpp"

namespace sailor::train::detail {

/// The shard at `path` from its holders (`from`, host:port, in order, possibly repeated): in
/// contiguous parts from several at once when it is large and several hold it (a part whose
/// holder fails is asked of the others), else whole from the first that answers. The parts
/// in order; an error names the shard and why each holder failed. `cancel` (may be null)
/// ends it early.
result<std::vector<comm::payload_buffer>> fetch_from(comm::transport& transport,
                                                     const std::string& path,
                                                     const std::vector<std::string>& from,
                                                     std::chrono::milliseconds timeout,
                                                     fetch_cancel* cancel = nullptr);

/// The bytes of `parts` together.
std::int64_t total_size(const std::vector<comm::payload_buffer>& parts);

}  // namespace sailor::train::detail
