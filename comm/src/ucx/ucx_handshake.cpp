// The UCX backend: the handshake (see ucx_core.hpp and comm/auth.hpp).

#include "ucx_core.hpp"

#include <spdlog/spdlog.h>

namespace sailor::comm::ucx_backend {

// ---------------------------------------------------------------- handshake

// Sends a refusal and closes once it left (or failed).
void ucx_core::refuse(const std::shared_ptr<ucx_connection>& c, const detail::hello_reply& reply) {
  release_held(c);
  auto conn = c;
  send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {},
       [this, conn](const op_status&) { close_conn(conn, false); }, false);
}

// Sends the server's answer to a hello or to a proof of the token: an acceptance goes out
// (true); a refusal goes out and then the connection closes (false).
bool ucx_core::answer(const std::shared_ptr<ucx_connection>& c, const detail::hello_reply& reply) {
  if (!reply.accepted) {
    refuse(c, reply);
    return false;
  }
  send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {}, nullptr, false);
  return true;
}

void ucx_core::on_hello(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes) {
  if (!c->server_ || c->hello_seen_) {
    fail(c, {errc::invalid_message, "unexpected hello"});
    return;
  }
  if (!answer(c, detail::answer_hello(*c, bytes, opts_.common, *log_, "ucx"))) return;
  if (!c->handshaken_) return;  // waits for the client's proof of the token
  detail::admit(*c, c);
  replay_held(c);
}

void ucx_core::on_auth(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> proof) {
  if (!c->server_ || !c->awaiting_proof_) {
    fail(c, {errc::invalid_message, "unexpected proof of the token"});
    return;
  }
  // The verdict goes first: the client sends nothing before it, and the server's own data
  // (once the user has the connection) follows it.
  if (!answer(c, detail::take_proof(*c, proof, opts_.common, *log_, "ucx"))) return;
  detail::admit(*c, c);
  replay_held(c);
}

void ucx_core::replay_held(const std::shared_ptr<ucx_connection>& c) {
  auto held = std::move(c->held_);
  c->held_.clear();
  c->held_bytes_ = 0;
  for (auto& h : held)
    on_data(c, h.id, h.header, h.data, h.length, static_cast<data_kind>(h.kind));
  deliver(c);
}

void ucx_core::release_held(const std::shared_ptr<ucx_connection>& c) {
  for (auto& h : c->held_)
    if (static_cast<data_kind>(h.kind) != data_kind::transient)
      ucp_am_data_release(worker_, h.data);
  c->held_.clear();
  c->held_bytes_ = 0;
}

void ucx_core::on_hello_reply(const std::shared_ptr<ucx_connection>& c,
                              std::span<const std::byte> bytes) {
  if (c->server_ || c->state_ != connection_state::connecting) return;
  if (c->awaiting_verdict_) {
    // The server's verdict on this side's proof of the token.
    auto decoded = detail::decode_hello_reply(bytes);
    auto* r = std::get_if<detail::hello_reply>(&decoded);
    if (!r || !r->accepted) {
      fail(c, {errc::refused, "refused by " + c->peer().remote.to_string() + ": " +
                                  (r ? r->reason : std::string("a reply that does not decode"))});
      return;
    }
    c->awaiting_verdict_ = false;
    c->state_ = connection_state::open;
    open_client(c);
    return;
  }
  auto outcome = detail::take_hello_reply(*c, bytes, opts_.common);
  if (outcome.error) {
    fail(c, *outcome.error);
    return;
  }
  if (!outcome.proof.empty()) {
    // Open once the server accepted the proof (its verdict), not before.
    c->state_ = connection_state::connecting;
    c->awaiting_verdict_ = true;
    send(c, am_auth, {}, std::move(outcome.proof), {}, nullptr, false);
    return;
  }
  open_client(c);
}

void ucx_core::open_client(const std::shared_ptr<ucx_connection>& c) {
  if (c->handlers_.on_open) c->handlers_.on_open();
  flush_queued(c);
  replay_held(c);
}

void ucx_core::flush_queued(const std::shared_ptr<ucx_connection>& c) {
  auto queued = std::move(c->queued_);
  c->queued_.clear();
  for (auto& q : queued)
    send(c, q.id, std::move(q.header), std::move(q.owned), q.payload, std::move(q.done), true);
}

}  // namespace sailor::comm::ucx_backend
