// Recovery from the survivors' memory without a disk: shards fetched into memory
// (shard_service.hpp's fetch_into_memory), restored from the received buffers.

#include <map>

#include "sailor/train/shard_service.hpp"
#include "state/shard_fetch.hpp"

namespace sailor::train {

std::int64_t received_shard::size() const { return detail::total_size(parts); }

std::vector<std::span<const std::byte>> received_shard::spans() const {
  std::vector<std::span<const std::byte>> out;
  for (const auto& p : parts)
    out.emplace_back(p.data(), p.size());
  return out;
}

result<std::vector<received_shard>> fetch_into_memory(comm::transport& transport,
                                                      const std::vector<shard_source>& sources,
                                                      std::chrono::milliseconds timeout,
                                                      std::int64_t* fetched_bytes,
                                                      fetch_cancel* cancel) {
  std::map<std::string, std::vector<std::string>> holders;  // path -> holders, in order
  for (const auto& s : sources)
    holders[s.path].push_back(s.holder);
  std::vector<received_shard> out;
  for (const auto& [path, from] : holders) {
    if (!servable_path(path))
      return sailor::error{error_kind::invalid_input,
                           "refusing to fetch '" + path + "': not a checkpoint path", "", 0, ""};
    auto parts = detail::fetch_from(transport, path, from, timeout, cancel);
    if (!parts)
      return parts.error();
    if (fetched_bytes)
      *fetched_bytes += detail::total_size(*parts);
    out.push_back({path, std::move(*parts)});
  }
  return out;
}

}  // namespace sailor::train
