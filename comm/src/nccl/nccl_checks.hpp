#pragma once
// What the NCCL communicator checks before anything reaches CUDA or NCCL: the group a
// create() asks for, the arguments of each operation, and the group names a factory has used.
// Pure C++ (no CUDA header), so the tests run them on machines without a GPU. NCCL itself
// checks little and fails late (a wrong root or a short buffer hangs or corrupts memory), so
// every refusal here is an invalid_input error naming the group and the operation.

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <sailor/comm/collective.hpp>

namespace sailor::comm::nccl_detail {

/// `global_ranks` is not empty, has no negative or repeated rank, and holds `global_rank`.
status check_group(const std::string& name, const std::vector<int>& global_ranks, int global_rank);

/// `buf` of operation `op` of group `group`: a null pointer only for zero elements.
status check_buffer(const std::string& group, const char* op, buffer_view buf);

/// A root of broadcast in 0..size-1.
status check_root(const std::string& group, int root, int size);

/// A peer of isend/irecv (`op`) in 0..size-1 and not this rank.
status check_peer(const std::string& group, const char* op, int peer, int rank, int size);

/// all_gather: both buffers valid, of one element type, and `out` holds size() inputs.
status check_gather(const std::string& group, buffer_view in, buffer_view out, int size);

/// The names of the groups one factory has started to create. A group's NCCL unique id is
/// exchanged under its name in the job's store, so a second group of that name would read the
/// first one's id (and join the wrong NCCL communicator, or hang): a name serves once per
/// factory, even when its first create() failed part way. Thread-safe.
class group_names {
public:
  /// Claims `name`; an error when this factory has claimed it before.
  status claim(const std::string& name);

private:
  std::mutex mutex_;
  std::set<std::string> used_;
};

}  // namespace sailor::comm::nccl_detail
