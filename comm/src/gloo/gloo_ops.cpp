#include "gloo_ops.hpp"

#include <pthread.h>

#include <cstring>
#include <vector>

namespace sailor::comm::gloo_detail {

namespace {
sigset_t sigpipe_set() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  return pipe;
}
}  // namespace

sigpipe_blocked::sigpipe_blocked() {
  const sigset_t pipe = sigpipe_set();
  pthread_sigmask(SIG_BLOCK, &pipe, &old_);
}

sigpipe_blocked::~sigpipe_blocked() {
  if (sigismember(&old_, SIGPIPE)) return;  // blocked before: nothing of ours to undo
  const sigset_t pipe = sigpipe_set();
  const timespec now{0, 0};
  while (sigtimedwait(&pipe, nullptr, &now) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

bool abort_state::abort(gloo::Context* context, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex);
  if (aborted) return false;
  aborted = true;
  why = reason;
  // First the connections: once a pair is closed the device thread no longer reads into (or
  // writes from) any buffer of it, so the woken waits below may release their memory.
  if (context) context->closeConnections();
  for (auto* buf : live) {
    buf->abortWaitSend();
    buf->abortWaitRecv();
  }
  return true;
}

op_buffer::op_buffer(gloo::Context& context, abort_state& abort, void* data, std::size_t bytes)
    : abort_(abort) {
  std::lock_guard<std::mutex> lock(abort_.mutex);
  if (abort_.aborted) throw aborted_exception{};
  buf_ = context.createUnboundBuffer(data, bytes);
  abort_.live.insert(buf_.get());
}

op_buffer::~op_buffer() {
  std::lock_guard<std::mutex> lock(abort_.mutex);
  abort_.live.erase(buf_.get());
}

// Posted under the abort lock: no operation reaches a pair after an abort closed it. Both
// write to the pair's socket in this thread (the data, or the notice of a receive).
void op_buffer::send(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) {
  sigpipe_blocked quiet;
  std::lock_guard<std::mutex> lock(abort_.mutex);
  if (abort_.aborted) throw aborted_exception{};
  buf_->send(peer, slot, offset, bytes);
}

void op_buffer::recv(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) {
  sigpipe_blocked quiet;
  std::lock_guard<std::mutex> lock(abort_.mutex);
  if (abort_.aborted) throw aborted_exception{};
  buf_->recv(peer, slot, offset, bytes);
}

void op_buffer::wait_send(std::chrono::milliseconds timeout) {
  if (!buf_->waitSend(timeout)) throw aborted_exception{};
}

void op_buffer::wait_recv(std::chrono::milliseconds timeout) {
  if (!buf_->waitRecv(timeout)) throw aborted_exception{};
}

namespace {

// Chunk c of n over `count` elements: [c * count / n, (c + 1) * count / n), in bytes.
struct chunks {
  std::size_t count, n, element;
  std::size_t begin(std::size_t c) const { return c * count / n * element; }
  std::size_t bytes(std::size_t c) const { return ((c + 1) * count / n - c * count / n) * element; }
  std::size_t at(int c) const {  // chunk index modulo n
    const int m = static_cast<int>(n);
    return static_cast<std::size_t>(((c % m) + m) % m);
  }
};

// One ring step: receive chunk `in` from the left into `into` at `into_offset` while chunk
// `out` goes to the right, and wait for both. Empty chunks are skipped on both sides alike.
void ring_step(const op_context& op, op_buffer& from, std::size_t out_offset, std::size_t out_bytes,
               op_buffer& into, std::size_t into_offset, std::size_t in_bytes) {
  const int rank = op.context.rank, n = op.context.size;
  const int left = (rank + n - 1) % n, right = (rank + 1) % n;
  if (in_bytes > 0) into.recv(left, op.slot, into_offset, in_bytes);
  if (out_bytes > 0) from.send(right, op.slot, out_offset, out_bytes);
  if (in_bytes > 0) into.wait_recv(op.timeout);
  if (out_bytes > 0) from.wait_send(op.timeout);
}

}  // namespace

void ring_all_reduce(const op_context& op, buffer_view buf, reduce_fn reduce) {
  const int rank = op.context.rank, n = op.context.size;
  const chunks ch{buf.count, static_cast<std::size_t>(n), size_of(buf.type)};
  auto* data = static_cast<char*>(buf.data);
  op_buffer whole(op.context, op.abort, buf.data, buf.bytes());
  std::vector<char> incoming(ch.bytes(0) + ch.element);  // the largest chunk
  op_buffer scratch(op.context, op.abort, incoming.data(), incoming.size());
  // Reduce-scatter: after step s, chunk (rank - s - 1) holds s + 2 ranks' sum here; rank r
  // ends with chunk r + 1 reduced over all.
  for (int s = 0; s < n - 1; ++s) {
    const std::size_t out = ch.at(rank - s), in = ch.at(rank - s - 1);
    ring_step(op, whole, ch.begin(out), ch.bytes(out), scratch, 0, ch.bytes(in));
    if (ch.bytes(in) > 0)
      reduce(data + ch.begin(in), data + ch.begin(in), incoming.data(), ch.bytes(in) / ch.element);
  }
  // All-gather of the reduced chunks, straight into the buffer.
  for (int s = 0; s < n - 1; ++s) {
    const std::size_t out = ch.at(rank + 1 - s), in = ch.at(rank - s);
    ring_step(op, whole, ch.begin(out), ch.bytes(out), whole, ch.begin(in), ch.bytes(in));
  }
}

void ring_all_gather(const op_context& op, buffer_view in, buffer_view out) {
  const int rank = op.context.rank, n = op.context.size;
  const std::size_t piece = in.bytes();
  auto* mine = static_cast<char*>(out.data) + static_cast<std::size_t>(rank) * piece;
  if (piece > 0 && in.data != mine) std::memcpy(mine, in.data, piece);
  if (piece == 0) return;
  op_buffer whole(op.context, op.abort, out.data, out.bytes());
  const chunks ch{static_cast<std::size_t>(n), static_cast<std::size_t>(n), piece};
  for (int s = 0; s < n - 1; ++s) {
    const std::size_t send = ch.at(rank - s), recv = ch.at(rank - s - 1);
    ring_step(op, whole, send * piece, piece, whole, recv * piece, piece);
  }
}

void broadcast_from(const op_context& op, buffer_view buf, int root) {
  const int rank = op.context.rank, n = op.context.size;
  op_buffer whole(op.context, op.abort, buf.data, buf.bytes());
  if (rank != root) {
    whole.recv(root, op.slot, 0, buf.bytes());
    whole.wait_recv(op.timeout);
    return;
  }
  for (int peer = 0; peer < n; ++peer)
    if (peer != root) whole.send(peer, op.slot, 0, buf.bytes());
  for (int peer = 0; peer < n; ++peer)
    if (peer != root) whole.wait_send(op.timeout);
}

}  // namespace sailor::comm::gloo_detail
