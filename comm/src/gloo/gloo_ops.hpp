#pragma once
// The Gloo backend's collectives, on Gloo's public transport (unbound buffers over the
// context's TCP pairs) rather than on its collective functions, so that an abort can end them.
//
// Why: this Gloo (Debian's 0.0~git20220518) cannot abort a collective in flight. Its
// collectives (gloo::allreduce, ...) wait on unbound buffers of their own; the only thing
// that wakes such a wait early is an error on a pair, and what signals one is protected
// (tcp::Pair, whose header Debian does not even ship whole); a shorter timeout is no way
// out either, since a wait that times out fails every pair of the context. What the library
// does offer publicly is abortWaitSend/abortWaitRecv on an unbound buffer and
// closeConnections on a context. So every buffer an operation waits on here is one of ours,
// registered with the communicator's abort_state: an abort closes the context's connections
// (the device thread then touches no buffer any more, and the peers see the connections go)
// and wakes every registered buffer's waits, which then fail.
//
// The algorithms are Gloo's usual ones: a ring all-reduce (reduce-scatter then all-gather,
// each rank sending 2(n-1)/n of the buffer; every rank ends with the same bits, each chunk
// reduced once in ring order), a ring all-gather, a broadcast from the root to each rank, and
// a barrier as an all-gather of one byte. Every message of one operation uses the
// operation's slot: between two ranks Gloo matches sends and receives of a slot in order.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <sailor/comm/collective.hpp>

namespace sailor::comm::gloo_detail {

/// Whether a communicator was aborted, and the unbound buffers of its operations in flight,
/// which an abort wakes. Shared by the communicator and its requests.
struct abort_state {
  std::mutex mutex;
  bool aborted = false;
  std::string why;
  std::set<gloo::transport::UnboundBuffer*> live;

  bool is_aborted() {
    std::lock_guard<std::mutex> lock(mutex);
    return aborted;
  }
  error aborted_error(const std::string& who) {
    std::lock_guard<std::mutex> lock(mutex);
    return error::disconnected("[comm " + who + "] aborted: " + why);
  }
  /// Marks it aborted (false: it was already): closes `context`'s connections, then wakes
  /// every live buffer's waits.
  bool abort(gloo::Context* context, const std::string& why);
};

/// Blocks SIGPIPE in this thread while it lives. Gloo writes to its sockets without
/// MSG_NOSIGNAL, so a write to a peer that reset the connection (a peer that aborted, or
/// died) would end the process; blocked, the write fails with EPIPE and Gloo fails the pair.
/// A SIGPIPE raised meanwhile is consumed before the mask is restored. Threads started
/// meanwhile inherit the mask (Gloo's device thread is made under one).
class sigpipe_blocked : non_copyable {
public:
  sigpipe_blocked();
  ~sigpipe_blocked();

private:
  sigset_t old_;
};

/// Thrown inside an operation that an abort ended (the communicator turns it into its error).
struct aborted_exception : std::exception {
  const char* what() const noexcept override { return "aborted"; }
};

/// An unbound buffer of one operation over [data, data + bytes), registered with `abort`
/// while it lives. Posting on an aborted communicator throws aborted_exception, and so does
/// a wait that an abort woke; Gloo's own failures (a peer gone, the timeout) throw Gloo's.
class op_buffer : non_copyable {
public:
  op_buffer(gloo::Context& context, abort_state& abort, void* data, std::size_t bytes);
  ~op_buffer();

  void send(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes);
  void recv(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes);
  void wait_send(std::chrono::milliseconds timeout);
  void wait_recv(std::chrono::milliseconds timeout);
  gloo::transport::UnboundBuffer& raw() { return *buf_; }

private:
  abort_state& abort_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
};

/// c[i] = a[i] op b[i] for n elements (Gloo's math functions).
using reduce_fn = void (*)(void* c, const void* a, const void* b, std::size_t n);

/// What every operation needs: the group, its abort state, the slot and the bound.
struct op_context {
  gloo::Context& context;
  abort_state& abort;
  std::uint64_t slot;
  std::chrono::milliseconds timeout;
};

void ring_all_reduce(const op_context& op, buffer_view buf, reduce_fn reduce);
void ring_all_gather(const op_context& op, buffer_view in, buffer_view out);
void broadcast_from(const op_context& op, buffer_view buf, int root);

}  // namespace sailor::comm::gloo_detail
