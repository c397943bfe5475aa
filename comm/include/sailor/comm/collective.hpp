#pragma once
/// Collectives and point-to-point transfers over a group of ranks, behind one interface.
///
/// Backends: Gloo on CPU (comm/src/gloo/), NCCL on CUDA (comm/src/nccl/, built only with
/// SAILOR_WITH_CUDA). Buffers are raw pointers with an element count and a dtype, so this
/// header needs no LibTorch. A communicator is a resource type: one owner, not copyable, and
/// one thread issues its operations (waits on requests may happen on any thread).
///
/// Ranks: every communicator is created over an ordered list of *global* ranks (the ranks of
/// a job); inside the communicator, ranks are the positions in that list (0..size-1).
/// Every member must create the same groups in the same order (a factory call blocks until
/// all members have joined), so callers enumerate groups in one global order.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sailor/comm/non_copyable.hpp>
#include <sailor/config/error.hpp>

namespace sailor::comm {

/// Element type of a buffer.
enum class element_type { f32, f64, f16, bf16, i32, i64, u8 };

/// Bytes of one element.
std::size_t size_of(element_type type);

enum class reduce_op { sum, max };

/// A contiguous buffer on the communicator's device (host memory for Gloo, device memory for
/// NCCL).
struct buffer_view {
  void* data = nullptr;
  std::size_t count = 0;  ///< elements
  element_type type = element_type::f32;

  std::size_t bytes() const { return count * size_of(type); }
};

/// An operation in flight. Destroying a request that has not completed waits for it (bounded
/// by the communicator's timeout) so that a buffer is never released under a transfer.
class request {
public:
  virtual ~request() = default;
  /// Blocks until done or `timeout`; an error when it timed out or the peer went away.
  virtual status wait(std::chrono::milliseconds timeout) = 0;
  /// True when done (successfully or not); never blocks.
  virtual bool test() = 0;
};

/// A group of ranks that can run collectives and exchange buffers.
class communicator : non_copyable {
public:
  virtual ~communicator() = default;

  virtual int rank() const = 0;  ///< position of this process in the group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;

  /// In place: every rank ends with the reduction of all ranks' buffers.
  virtual status all_reduce(buffer_view buf, reduce_op op = reduce_op::sum) = 0;
  /// In place: every rank ends with `root`'s buffer.
  virtual status broadcast(buffer_view buf, int root) = 0;
  /// `out` holds size() * in.count elements: rank r's input at offset r * in.count.
  virtual status all_gather(buffer_view in, buffer_view out) = 0;
  virtual status barrier() = 0;

  /// Starts sending `buf` to `peer` (group rank); `tag` tells messages between the same pair
  /// apart (match it on the receiving side). The buffer must live until the request is done.
  virtual std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) = 0;
  /// Starts receiving exactly buf.bytes() from `peer` with `tag` into `buf`.
  virtual std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) = 0;
  /// Blocking forms.
  status send(buffer_view buf, int peer, std::uint64_t tag);
  status recv(buffer_view buf, int peer, std::uint64_t tag);

  /// Waits until one of `requests` is done; its index, or an error after `timeout`.
  /// Null entries are skipped.
  virtual result<int> wait_any(const std::vector<request*>& requests,
                               std::chrono::milliseconds timeout);

  /// Bound on every blocking operation of this communicator.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// Abandons the group: every operation of this communicator in flight, on any thread,
  /// returns an error within a short bound (well under a second, whatever its peers do), and
  /// every later one returns it at once; the errors name `why`. Its connections close (a
  /// peer may or may not notice before its own timeout: abort every rank that gives up).
  /// Any thread may call it, any number of times (the first `why` stays); it cannot be
  /// undone: the owner destroys the communicator and creates another. For a rank that gives
  /// up its work (its plan was released), not for one operation.
  virtual void abort(const std::string& why) = 0;
};

/// Makes communicators over subsets of a job's global ranks. One factory per process (or per
/// rank thread in tests); it knows its own global rank.
class communicator_factory {
public:
  virtual ~communicator_factory() = default;
  virtual int global_rank() const = 0;
  /// Blocks until every member of `global_ranks` has called create with the same `name`
  /// (bounded by the factory's timeout). `global_ranks` must contain global_rank().
  virtual result<std::unique_ptr<communicator>> create(const std::string& name,
                                                       const std::vector<int>& global_ranks) = 0;
};

/// A key-value store through which the ranks of a job meet (they exchange their addresses).
/// Across machines the coordinator serves one (actors/rendezvous.hpp); tests use a folder or
/// an in-process store. Thread-safe: every rank thread of a process may share one.
class rendezvous_store {
public:
  virtual ~rendezvous_store() = default;
  virtual status set(const std::string& key, const std::vector<char>& value) = 0;
  /// The value of `key`, waiting until some rank has set it; an error (timed_out) after
  /// `timeout`, or when the store cannot be reached.
  virtual result<std::vector<char>> get(const std::string& key,
                                        std::chrono::milliseconds timeout) = 0;
};

/// Where Gloo ranks meet to exchange addresses.
struct gloo_options {
  /// The store the ranks meet through (the coordinator's); takes precedence over the two
  /// below.
  std::shared_ptr<rendezvous_store> store;
  /// A folder shared by all processes of one machine (Gloo FileStore, tests and benches
  /// only); empty: use `in_process_store`.
  std::string store_path;
  /// Shared by rank threads of one process (from make_in_process_store()).
  std::shared_ptr<void> in_process_store;
  /// The address the TCP device listens on: the node's advertised address, which its peers
  /// must be able to reach.
  std::string hostname = "127.0.0.1";
  std::chrono::milliseconds timeout{60000};
  /// Distinguishes jobs (or attempts after a re-plan) sharing a store.
  std::string prefix = "sailor";
};

/// An in-memory rendezvous store for ranks running as threads of one process.
std::shared_ptr<void> make_in_process_store();

/// A Gloo factory for global rank `global_rank` (TCP device on `options.hostname`).
result<std::unique_ptr<communicator_factory>> make_gloo_factory(int global_rank,
                                                                 const gloo_options& options);

#if defined(SAILOR_WITH_CUDA)
/// An NCCL factory: the unique id of each group is exchanged through the Gloo rendezvous
/// store of `options`; buffers are device pointers on `device`, work runs on a stream of
/// this communicator and requests complete when the stream work has.
result<std::unique_ptr<communicator_factory>> make_nccl_factory(int global_rank, int device,
                                                                 const gloo_options& options);
#endif

}  // namespace sailor::comm
