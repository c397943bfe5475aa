#include "nccl_checks.hpp"

#include <algorithm>

namespace sailor::comm::nccl_detail {
namespace {

error refuse(const std::string& group, const std::string& what) {
  return error::invalid_input("", "[comm " + group + "] " + what);
}

}  // namespace

status check_group(const std::string& name, const std::vector<int>& global_ranks, int global_rank) {
  if (name.empty()) return refuse(name, "a group needs a name (its NCCL id is exchanged under it)");
  if (global_ranks.empty()) return refuse(name, "a group needs at least one rank");
  std::vector<int> sorted = global_ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0) return refuse(name, "negative global rank " + std::to_string(sorted.front()));
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end())
    return refuse(name, "global rank " + std::to_string(*dup) + " appears twice");
  if (!std::binary_search(sorted.begin(), sorted.end(), global_rank))
    return refuse(name, "global rank " + std::to_string(global_rank) + " (this factory's) is not a member");
  return {};
}

status check_buffer(const std::string& group, const char* op, buffer_view buf) {
  if (!buf.data && buf.count > 0)
    return refuse(group, std::string(op) + ": null buffer of " + std::to_string(buf.count) + " elements");
  return {};
}

status check_root(const std::string& group, int root, int size) {
  if (root < 0 || root >= size)
    return refuse(group, "broadcast: root " + std::to_string(root) + " is not a rank of the group (0.." +
                             std::to_string(size - 1) + ")");
  return {};
}

status check_peer(const std::string& group, const char* op, int peer, int rank, int size) {
  if (peer < 0 || peer >= size)
    return refuse(group, std::string(op) + ": peer " + std::to_string(peer) +
                             " is not a rank of the group (0.." + std::to_string(size - 1) + ")");
  if (peer == rank) return refuse(group, std::string(op) + ": peer " + std::to_string(peer) + " is this rank");
  return {};
}

status check_gather(const std::string& group, buffer_view in, buffer_view out, int size) {
  if (auto st = check_buffer(group, "all_gather input", in)) return st;
  if (auto st = check_buffer(group, "all_gather output", out)) return st;
  if (in.type != out.type) return refuse(group, "all_gather: input and output differ in element type");
  if (out.count != in.count * static_cast<std::size_t>(size))
    return refuse(group, "all_gather: output holds " + std::to_string(out.count) + " elements, needs " +
                             std::to_string(in.count * static_cast<std::size_t>(size)) + " (size() inputs)");
  return {};
}

status group_names::claim(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!used_.insert(name).second)
    return refuse(name, "this factory has made a group of that name before (each name serves once: "
                        "its NCCL id is exchanged under it)");
  return {};
}

}  // namespace sailor::comm::nccl_detail
