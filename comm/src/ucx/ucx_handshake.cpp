// The UCX backend: the handshake (see ucx_core.hpp).

#include "ucx_core.hpp"

#include <spdlog/spdlog.h>

namespace sailor::comm::ucx_backend {

// ---------------------------------------------------------------- handshake

void ucx_core::on_hello(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes) {
  if (!c->server_ || c->handshaken_) {
    fail(c, {errc::invalid_message, "unexpected hello"});
    return;
  }
  auto reply = detail::answer_hello(*c, bytes, opts_.common, *log_, "ucx");
  if (!reply.accepted) {
    release_held(c);
    auto conn = c;
    send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {},
         [this, conn](const op_status&) { close_conn(conn, false); }, false);
    return;
  }
  send(c, am_hello_reply, {}, detail::encode_hello_reply(reply), {}, nullptr, false);
  detail::admit(*c, c);
  replay_held(c);
}

void ucx_core::replay_held(const std::shared_ptr<ucx_connection>& c) {
  auto held = std::move(c->held_);
  c->held_.clear();
  for (auto& h : held)
    on_data(c, h.id, h.header, h.data, h.length, static_cast<data_kind>(h.kind));
  deliver(c);
}

void ucx_core::release_held(const std::shared_ptr<ucx_connection>& c) {
  for (auto& h : c->held_)
    if (static_cast<data_kind>(h.kind) != data_kind::transient)
      ucp_am_data_release(worker_, h.data);
  c->held_.clear();
}

void ucx_core::on_hello_reply(const std::shared_ptr<ucx_connection>& c,
                              std::span<const std::byte> bytes) {
  if (c->server_ || c->state_ != connection_state::connecting) return;
  if (auto err = detail::take_hello_reply(*c, bytes, opts_.common)) {
    fail(c, *err);
    return;
  }
  if (c->handlers_.on_open) c->handlers_.on_open();
  replay_held(c);
}

}  // namespace sailor::comm::ucx_backend
