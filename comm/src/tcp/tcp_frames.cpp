// The TCP backend: frames out (queued, written with writev() from the caller's buffer) and in
// (each length checked against its kind's limit before anything is allocated), the
// handshake's frames, and failure (see tcp_transport.cpp for the frame format).

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "../auth.hpp"
#include "handshake.hpp"
#include "tcp_core.hpp"

namespace sailor::comm::tcp_backend {

// ---------------------------------------------------------------- send

void tcp_core::queue_frame(const std::shared_ptr<tcp_connection>& c, std::uint8_t kind,
                           std::vector<std::byte> header, std::vector<std::byte> owned,
                           std::span<const std::byte> payload, completion done) {
  bool handshake = kind == kind_hello || kind == kind_hello_reply || kind == kind_auth;
  if (c->fd_ < 0 || (!handshake && (c->state_ == connection_state::failed ||
                                    c->state_ == connection_state::closed))) {
    detail::complete(done, c->error_.value_or(transport_error{errc::closed, "connection closed"}));
    return;
  }
  out_frame f;
  f.fh.kind = kind;
  f.fh.header_len = static_cast<std::uint32_t>(header.size());
  f.header = std::move(header);
  f.owned = std::move(owned);
  f.payload = f.owned.empty() ? payload : std::span<const std::byte>(f.owned);
  f.fh.payload_len = f.payload.size();
  f.done = std::move(done);
  if (!handshake && !c->server_ && c->state_ == connection_state::connecting) {
    c->early_.push_back(std::move(f));
    return;
  }
  c->out_.push_back(std::move(f));
  if (c->stream_ready()) flush(c);
}

void tcp_core::send_user(const std::shared_ptr<tcp_connection>& c, detail::user_message kind,
                         std::vector<std::byte> header, std::vector<std::byte> owned,
                         std::span<const std::byte> payload, completion done) {
  queue_frame(c, kind == detail::user_message::tensor ? kind_tensor : kind_control,
              std::move(header), std::move(owned), payload, std::move(done));
}

void tcp_core::flush(const std::shared_ptr<tcp_connection>& c) {
  while (!c->out_.empty() && c->stream_ready()) {
    auto& f = c->out_.front();
    // The frame's three parts from where the last write stopped.
    iovec iov[3];
    int n = 0;
    std::size_t skip = f.written;
    auto add = [&](const void* p, std::size_t len) {
      if (skip >= len) {
        skip -= len;
        return;
      }
      iov[n].iov_base = const_cast<std::byte*>(static_cast<const std::byte*>(p) + skip);
      iov[n].iov_len = len - skip;
      skip = 0;
      ++n;
    };
    add(&f.fh, sizeof(f.fh));
    add(f.header.data(), f.header.size());
    add(f.payload.data(), f.payload.size());
    auto io = stream_write(*c, iov, n);
    if (io.blocked) return;
    if (!io.error.empty() || io.closed) {
      fail(c, {errc::disconnected, "send to " + c->peer().remote.to_string() + ": " +
                                       (io.closed ? std::string("peer closed") : io.error)});
      return;
    }
    f.written += static_cast<std::size_t>(io.bytes);
    if (f.written < f.total()) continue;
    auto done = std::move(f.done);
    bool refuse_close = f.fh.kind == kind_hello_reply && c->state_ == connection_state::failed;
    c->out_.pop_front();
    detail::complete(done, std::nullopt);
    if (refuse_close) {
      drop(c, c->error_);
      return;
    }
  }
  if (c->out_.empty() && c->fd_ >= 0 && c->state_ == connection_state::closed) drop(c, c->error_);
}

// ---------------------------------------------------------------- receive

// Why a frame header is refused, before anything is allocated for the frame: a kind the
// connection does not expect in its state, or a length over the limit of its kind.
std::optional<std::string> frame_refusal(const tcp_connection& c, const frame_header& fh,
                                         const transport_options& opts) {
  if (fh.magic != frame_magic) return "not a Sailor frame";
  auto lengths = [&](std::uint64_t header_max, std::uint64_t payload_max,
                     const char* what) -> std::optional<std::string> {
    if (fh.header_len > header_max || fh.payload_len > payload_max)
      return std::string(what) + " announcing " + std::to_string(fh.header_len) + " + " +
             std::to_string(fh.payload_len) + " bytes, over its limit of " +
             std::to_string(header_max) + " + " + std::to_string(payload_max);
    return std::nullopt;
  };
  switch (fh.kind) {
    case kind_hello:
      if (!c.server_ || c.hello_seen_) return "unexpected hello";
      return lengths(detail::max_handshake_bytes, 0, "a hello");
    case kind_hello_reply:
      // A client may hear a refusal after it sent its proof.
      if (c.server_) return "unexpected hello reply";
      return lengths(detail::max_handshake_bytes, 0, "a hello reply");
    case kind_auth:
      if (!c.server_ || !c.awaiting_proof_) return "unexpected proof of the token";
      return lengths(detail::proof_bytes, 0, "a proof");
    case kind_control:
      if (!c.handshaken_) return "a message before the handshake";
      return lengths(0, opts.max_control_bytes, "a control message");
    case kind_tensor:
      if (!c.handshaken_) return "a message before the handshake";
      return lengths(detail::max_tensor_header_bytes, opts.max_tensor_bytes, "a tensor");
    default:
      return "unknown frame kind " + std::to_string(fh.kind);
  }
}

void tcp_core::on_readable(const std::shared_ptr<tcp_connection>& c) {
  // Bounded per wake-up so one busy peer does not starve the others.
  for (int round = 0; round < 64 && c->fd_ >= 0; ++round) {
    void* dest;
    std::size_t want;
    if (c->in_fh_got_ < sizeof(frame_header)) {
      dest = reinterpret_cast<std::byte*>(&c->in_fh_) + c->in_fh_got_;
      want = sizeof(frame_header) - c->in_fh_got_;
    } else if (!c->in_have_header_) {
      dest = c->in_header_.data() + c->in_header_got_;
      want = c->in_header_.size() - c->in_header_got_;
    } else {
      dest = c->in_dest_ + c->in_payload_got_;
      want = c->in_fh_.payload_len - c->in_payload_got_;
    }
    stream_io io;
    if (want != 0) {
      io = stream_read(*c, dest, want);
      if (io.closed) {
        fail(c, {errc::disconnected, "peer " + c->peer().remote.to_string() + " closed the connection"});
        return;
      }
      if (io.blocked) return;
      if (!io.error.empty()) {
        fail(c, {errc::disconnected, "receive from " + c->peer().remote.to_string() + ": " +
                                         io.error});
        return;
      }
    }
    std::size_t got = static_cast<std::size_t>(io.bytes);
    if (c->in_fh_got_ < sizeof(frame_header)) {
      c->in_fh_got_ += got;
      if (c->in_fh_got_ < sizeof(frame_header)) continue;
      const auto& fh = c->in_fh_;
      if (auto why = frame_refusal(*c, fh, opts_)) {
        fail(c, {errc::invalid_message, "garbage from " + c->peer().remote.to_string() + " (" +
                                            *why + ")"});
        return;
      }
      c->in_header_.assign(fh.header_len, std::byte{0});
      c->in_header_got_ = 0;
      c->in_have_header_ = false;
      if (fh.header_len == 0) {
        c->in_have_header_ = true;
        if (!start_payload(c)) return;
      }
    } else if (!c->in_have_header_) {
      c->in_header_got_ += got;
      if (c->in_header_got_ < c->in_header_.size()) continue;
      c->in_have_header_ = true;
      if (!start_payload(c)) return;
    } else {
      c->in_payload_got_ += got;
    }
    if (c->in_have_header_ && c->in_payload_got_ == c->in_fh_.payload_len) {
      on_frame(c);
      c->in_fh_got_ = 0;
      c->in_have_header_ = false;
      c->in_payload_got_ = 0;
    }
  }
}

// The header is complete: decide where the payload goes.
bool tcp_core::start_payload(const std::shared_ptr<tcp_connection>& c) {
  // Kinds and lengths were checked against their limits with the frame header.
  const auto& fh = c->in_fh_;
  c->in_payload_got_ = 0;
  if (fh.kind != kind_tensor) {
    c->in_control_.assign(fh.payload_len, std::byte{0});
    c->in_dest_ = c->in_control_.data();
    return true;
  }
  auto decoded = detail::decode_tensor_header(c->in_header_);
  if (auto* err = std::get_if<transport_error>(&decoded)) {
    fail(c, *err);
    return false;
  }
  c->in_desc_ = std::move(std::get<tensor_descriptor>(decoded));
  if (c->in_desc_.bytes != fh.payload_len) {
    fail(c, {errc::invalid_message, "tensor header and frame disagree on the payload size"});
    return false;
  }
  if (c->handlers_.allocate) {
    c->in_payload_ = c->handlers_.allocate(c->in_desc_);
    if (c->in_payload_.size() < fh.payload_len) {
      fail(c, {errc::invalid_argument, "allocate() gave a buffer too small"});
      return false;
    }
  } else {
    c->in_payload_ = payload_buffer::allocate(fh.payload_len);
  }
  c->in_dest_ = c->in_payload_.data();
  return true;
}

void tcp_core::on_hello_frame(const std::shared_ptr<tcp_connection>& c) {
  auto reply = detail::answer_hello(*c, c->in_header_, opts_, *log_, "tcp");
  // A refusal goes out, then the connection closes (see flush()).
  queue_frame(c, kind_hello_reply, detail::encode_hello_reply(reply), {}, {}, nullptr);
  if (c->handshaken_) detail::admit(*c, c);
}

void tcp_core::on_auth_frame(const std::shared_ptr<tcp_connection>& c) {
  auto verdict = detail::take_proof(*c, c->in_header_, opts_, *log_, "tcp");
  if (!verdict.accepted) {
    queue_frame(c, kind_hello_reply, detail::encode_hello_reply(verdict), {}, {}, nullptr);
    return;
  }
  detail::admit(*c, c);
}

void tcp_core::on_reply_frame(const std::shared_ptr<tcp_connection>& c) {
  if (c->handshaken_) {
    // The server refused the proof this side sent.
    auto decoded = detail::decode_hello_reply(c->in_header_);
    auto* r = std::get_if<detail::hello_reply>(&decoded);
    fail(c, {errc::refused, "refused by " + c->peer().remote.to_string() + ": " +
                                (r ? r->reason : std::string("a reply that does not decode"))});
    return;
  }
  auto outcome = detail::take_hello_reply(*c, c->in_header_, opts_);
  if (outcome.error) {
    fail(c, *outcome.error);
    return;
  }
  if (!outcome.proof.empty())
    queue_frame(c, kind_auth, std::move(outcome.proof), {}, {}, nullptr);
  for (auto& f : c->early_) c->out_.push_back(std::move(f));
  c->early_.clear();
  flush(c);
  if (c->fd_ < 0) return;  // the flush failed the connection
  if (c->handlers_.on_open) c->handlers_.on_open();
}

void tcp_core::on_frame(const std::shared_ptr<tcp_connection>& c) {
  switch (c->in_fh_.kind) {
    case kind_hello: on_hello_frame(c); return;
    case kind_auth: on_auth_frame(c); return;
    case kind_hello_reply: on_reply_frame(c); return;
    case kind_control:
      if (c->state_ == connection_state::open && c->handlers_.on_control)
        c->handlers_.on_control(std::move(c->in_control_));
      c->in_control_.clear();
      return;
    case kind_tensor:
      if (c->state_ == connection_state::open && c->handlers_.on_tensor)
        c->handlers_.on_tensor(std::move(c->in_desc_), std::move(c->in_payload_));
      c->in_payload_ = {};
      return;
  }
}

// ---------------------------------------------------------------- failure and close

// Completes every queued send with `st`, closes the socket and forgets the connection.
void tcp_core::drop(const std::shared_ptr<tcp_connection>& c, const op_status& st) {
  auto out = std::move(c->out_);
  c->out_.clear();
  for (auto& f : c->early_) out.push_back(std::move(f));
  c->early_.clear();
  if (c->ssl_) SSL_free(std::exchange(c->ssl_, nullptr));
  if (c->fd_ >= 0) ::close(c->fd_);
  c->fd_ = -1;
  conns_.erase(c->id_);
  for (auto& f : out) {
    // A frame already partly written when the connection went away did not arrive either.
    detail::complete(f.done, st ? st : op_status(transport_error{errc::closed, "connection closed"}));
  }
}

void tcp_core::fail(const std::shared_ptr<tcp_connection>& c, transport_error err) {
  auto s = c->state_.load();
  if (s == connection_state::closed || s == connection_state::failed) {
    drop(c, c->error_ ? c->error_ : op_status(err));
    return;
  }
  auto on_error = detail::mark_failed(*c, err, *log_, "tcp");
  drop(c, err);
  if (on_error) on_error(err);
}

}  // namespace sailor::comm::tcp_backend
