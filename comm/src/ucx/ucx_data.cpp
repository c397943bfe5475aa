// The UCX backend: active messages in and out (see ucx_core.hpp).

#include "ucx_core.hpp"

#include <cstring>

#include <spdlog/spdlog.h>

#include "../auth.hpp"
#include "handshake.hpp"

namespace sailor::comm::ucx_backend {

// ---------------------------------------------------------------- receive

namespace {

ucs_status_t handle_am(ucx_core* core, unsigned id, const void* header, size_t header_length,
                       void* data, size_t length, const ucp_am_recv_param_t* param);

}  // namespace

// No exception may cross into UCX: a handler that throws drops the message, logged.
ucs_status_t ucx_core::am_callback(void* arg, const void* header, size_t header_length,
                                   void* data, size_t length, const ucp_am_recv_param_t* param) {
  auto* a = static_cast<am_arg*>(arg);
  try {
    return handle_am(a->core, a->id, header, header_length, data, length, param);
  } catch (const std::exception& e) {
    a->core->log_->error("[ucx] dropped an active message: its handling threw: {}", e.what());
  } catch (...) {
    a->core->log_->error("[ucx] dropped an active message: its handling threw");
  }
  return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_ERR_REJECTED : UCS_OK;
}

namespace {

ucs_status_t handle_am(ucx_core* core, unsigned id, const void* header, size_t header_length,
                       void* data, size_t length, const ucp_am_recv_param_t* param) {
  struct in_callback {
    ucx_core* core;
    explicit in_callback(ucx_core* c) : core(c) { core->on_callback_ = true; }
    ~in_callback() { core->on_callback_ = false; }
  } guard(core);
  bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
    core->log_->warn("[ucx] dropped an active message without reply endpoint");
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
  }
  auto it = core->by_ep_.find(param->reply_ep);
  if (it == core->by_ep_.end()) {
    core->log_->warn("[ucx] dropped active message {} from an unknown endpoint", id);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
  }
  auto conn = it->second;
  if (id == am_hello || id == am_hello_reply || id == am_auth) {
    if (rndv || length > detail::max_handshake_bytes) {
      core->deferred_.push_back([core, conn] {
        core->fail(conn, {errc::invalid_message, "oversized handshake"});
      });
      return rndv ? UCS_ERR_REJECTED : UCS_OK;
    }
    std::vector<std::byte> bytes(length);
    if (length) std::memcpy(bytes.data(), data, length);
    core->deferred_.push_back([core, conn, id, bytes = std::move(bytes)] {
      if (id == am_hello)
        core->on_hello(conn, bytes);
      else if (id == am_auth)
        core->on_auth(conn, bytes);
      else
        core->on_hello_reply(conn, bytes);
    });
    return UCS_OK;
  }
  return core->on_data(conn, id,
                       {static_cast<const std::byte*>(header), header ? header_length : 0}, data,
                       length,
                       rndv ? ucx_core::data_kind::rndv
                            : (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA ? ucx_core::data_kind::persistent
                                                                            : ucx_core::data_kind::transient));
}

}  // namespace

ucs_status_t ucx_core::drop(void* data, data_kind kind) {
  // In the AM callback: REJECTED drops an rndv descriptor, OK releases eager data. In a
  // deferred call the return value is ignored, so release held data here.
  if (kind != data_kind::transient && !on_callback_) ucp_am_data_release(worker_, data);
  return kind == data_kind::rndv ? UCS_ERR_REJECTED : UCS_OK;
}

ucs_status_t ucx_core::on_data(const std::shared_ptr<ucx_connection>& c, unsigned id,
                               std::span<const std::byte> header, void* data, size_t length,
                               data_kind kind) {
  if (c->state_ == connection_state::connecting)
    return hold(c, id, header, data, length, kind);
  // Messages of a connection that is not (or no longer) open are dropped.
  if (!c->handshaken_ || c->state_ == connection_state::failed ||
      c->state_ == connection_state::closed) {
    log_->warn("[ucx] connection {}: dropped a message received in state {}{}", c->id_,
               to_string(c->state_.load()), c->handshaken_ ? "" : " before the handshake");
    return drop(data, kind);
  }
  if (header.size() < sizeof(std::uint64_t))
    return refuse_message(c, {errc::invalid_message, "message without sequence number"}, data, kind);
  std::uint64_t seq;
  std::memcpy(&seq, header.data(), sizeof(seq));
  header = header.subspan(sizeof(seq));
  if (auto e = check_message(*c, id, header, length, seq))
    return refuse_message(c, std::move(*e), data, kind);
  auto slot = receive_slot(*c, id, header, length);
  if (auto* e = std::get_if<transport_error>(&slot))
    return refuse_message(c, std::move(*e), data, kind);
  return receive_into(c, seq, std::move(std::get<std::unique_ptr<pending_recv>>(slot)), data,
                      length, kind);
}

ucs_status_t ucx_core::refuse_message(const std::shared_ptr<ucx_connection>& c,
                                      transport_error e, void* data, data_kind kind) {
  deferred_.push_back([this, c, e = std::move(e)] { fail(c, e); });
  return drop(data, kind);
}

// Before the peer proved who it is, what it may make this side hold is bounded; a server
// that proved the job token (the client waits for its verdict) is not.
ucs_status_t ucx_core::hold(const std::shared_ptr<ucx_connection>& c, unsigned id,
                            std::span<const std::byte> header, void* data, size_t length,
                            data_kind kind) {
  std::size_t eager = kind == data_kind::rndv ? 0 : length;
  if (!c->handshaken_ &&
      (c->held_.size() >= 4096 || c->held_bytes_ + eager + header.size() > max_held_bytes))
    return refuse_message(c, {errc::invalid_message, "too many messages before the handshake"},
                          data, kind);
  c->held_bytes_ += eager + header.size();
  ucx_connection::held_message h{id, {header.begin(), header.end()}, data, length,
                                 static_cast<int>(kind), nullptr};
  if (kind == data_kind::transient) {
    h.copy = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(data),
                                                      static_cast<const std::byte*>(data) + length);
    h.data = h.copy->data();
    c->held_.push_back(std::move(h));
    return UCS_OK;
  }
  c->held_.push_back(std::move(h));
  return UCS_INPROGRESS;
}

// A sequence number seen before, an unknown kind, or a message over its kind's limit.
std::optional<transport_error> ucx_core::check_message(const ucx_connection& c, unsigned id,
                                                       std::span<const std::byte> header,
                                                       size_t length, std::uint64_t seq) const {
  if (seq < c.deliver_seq_ || c.recvs_.count(seq))
    return transport_error{errc::invalid_message, "duplicate sequence number " + std::to_string(seq)};
  const auto& limits = opts_.common;
  if ((id == am_control && length > limits.max_control_bytes) ||
      (id == am_tensor &&
       (length > limits.max_tensor_bytes || header.size() > detail::max_tensor_header_bytes)) ||
      (id != am_control && id != am_tensor))
    return transport_error{errc::invalid_message, "a message (active message " + std::to_string(id) +
                                                      ") of " + std::to_string(length) +
                                                      " bytes, over its limit"};
  return std::nullopt;
}

// A control message's bytes, or a tensor's decoded header and payload (the user's allocate()
// where there is one).
std::variant<std::unique_ptr<pending_recv>, transport_error> ucx_core::receive_slot(
  const ucx_connection& c, unsigned id, std::span<const std::byte> header, size_t length) {
  auto slot = std::make_unique<pending_recv>();
  if (id == am_control) {
    slot->control.resize(length);
    return slot;
  }
  slot->tensor = true;
  auto decoded = detail::decode_tensor_header(header);
  if (auto* err = std::get_if<transport_error>(&decoded))
    return *err;
  slot->desc = std::move(std::get<tensor_descriptor>(decoded));
  if (slot->desc.bytes != length)
    return transport_error{errc::invalid_message, "tensor header says " + std::to_string(slot->desc.bytes) +
                                                      " bytes, payload has " + std::to_string(length)};
  if (!c.handlers_.allocate) {
    slot->payload = payload_buffer::allocate(length);
    return slot;
  }
  slot->payload = c.handlers_.allocate(slot->desc);
  if (slot->payload.size() < length)
    return transport_error{errc::invalid_argument, "allocate() gave " + std::to_string(slot->payload.size()) +
                                                       " bytes for a payload of " + std::to_string(length)};
  return slot;
}

// Eager data is copied now; a rendezvous message is fetched into the slot by UCX.
ucs_status_t ucx_core::receive_into(const std::shared_ptr<ucx_connection>& c, std::uint64_t seq,
                                    std::unique_ptr<pending_recv> slot, void* data, size_t length,
                                    data_kind kind) {
  std::byte* dest = slot->tensor ? slot->payload.data() : slot->control.data();
  pending_recv* raw = slot.get();
  c->recvs_.emplace(seq, std::move(slot));
  if (kind != data_kind::rndv) {
    if (length) std::memcpy(dest, data, length);
    if (kind == data_kind::persistent && !on_callback_) ucp_am_data_release(worker_, data);
    raw->ready = true;
    deferred_.push_back([this, c] { deliver(c); });
    return UCS_OK;
  }
  auto* op = new recv_op{c, raw};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &ucx_core::recv_callback;
  p.user_data = op;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, data, dest, length, &p);
  if (req == nullptr) {
    recv_callback(nullptr, UCS_OK, length, op);
  } else if (UCS_PTR_IS_ERR(req)) {
    recv_callback(nullptr, UCS_PTR_STATUS(req), 0, op);
  }
  return UCS_INPROGRESS;
}

void ucx_core::recv_callback(void* request, ucs_status_t status, size_t, void* user_data) {
  std::unique_ptr<recv_op> op(static_cast<recv_op*>(user_data));
  auto core = op->conn->core_.lock();
  if (request) ucp_request_free(request);
  if (!core) return;
  auto c = op->conn;
  if (status != UCS_OK) {
    core->deferred_.push_back([core, c, status] {
      core->fail(c, {errc::disconnected, "receive from " + c->peer().remote.to_string() +
                                             " failed: " + status_text(status)});
    });
    return;
  }
  op->slot->ready = true;
  core->deferred_.push_back([core, c] { core->deliver(c); });
}

void ucx_core::deliver(const std::shared_ptr<ucx_connection>& c) {
  while (!c->recvs_.empty() && c->recvs_.begin()->first == c->deliver_seq_ &&
         c->recvs_.begin()->second->ready) {
    if (c->state_ != connection_state::open) {
      c->recvs_.clear();
      return;
    }
    auto slot = std::move(c->recvs_.begin()->second);
    c->recvs_.erase(c->recvs_.begin());
    ++c->deliver_seq_;
    // A handler that throws closes its connection; the progress thread goes on.
    try {
      if (slot->tensor) {
        if (c->handlers_.on_tensor) c->handlers_.on_tensor(std::move(slot->desc), std::move(slot->payload));
      } else {
        if (c->handlers_.on_control) c->handlers_.on_control(std::move(slot->control));
      }
    } catch (const std::exception& e) {
      log_->error("[ucx] connection {}: a receive handler threw: {}", c->id_, e.what());
      fail(c, {errc::transport_failure, std::string("a receive handler threw: ") + e.what()});
      return;
    }
  }
}

// ---------------------------------------------------------------- send

void ucx_core::send(const std::shared_ptr<ucx_connection>& c, unsigned id,
                    std::vector<std::byte> header, std::vector<std::byte> owned,
                    std::span<const std::byte> data, completion done, bool force_rndv) {
  bool handshake = id == am_hello || id == am_hello_reply || id == am_auth;
  if (c->ep_ == nullptr || (!handshake && (c->state_ == connection_state::failed ||
                                          c->state_ == connection_state::closed))) {
    transport_error e = c->error_.value_or(transport_error{errc::closed, "connection closed"});
    detail::complete(done, e);
    return;
  }
  if (!handshake && !c->server_ && c->state_ == connection_state::connecting) {
    c->queued_.push_back({{std::move(header), std::move(owned), data, std::move(done)}, id});
    return;
  }
  if (!handshake) {
    std::uint64_t seq = ++c->send_seq_;
    header.insert(header.begin(), reinterpret_cast<const std::byte*>(&seq),
                  reinterpret_cast<const std::byte*>(&seq) + sizeof(seq));
  }
  auto* op = new send_op{this, c, std::move(done), std::move(header), std::move(owned)};
  sends_in_flight_.insert(op);
  if (!op->owned.empty()) data = op->owned;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  if (force_rndv && opts_.rndv_threshold_bytes > 0 && data.size() >= opts_.rndv_threshold_bytes)
    p.flags |= UCP_AM_SEND_FLAG_RNDV;
  p.cb.send = &ucx_core::send_callback;
  p.user_data = op;
  ucs_status_ptr_t req =
      ucp_am_send_nbx(c->ep_, id, op->header.empty() ? nullptr : op->header.data(),
                      op->header.size(), data.empty() ? nullptr : data.data(), data.size(), &p);
  if (req == nullptr) {
    send_callback(nullptr, UCS_OK, op);
  } else if (UCS_PTR_IS_ERR(req)) {
    send_callback(nullptr, UCS_PTR_STATUS(req), op);
  }
}

void ucx_core::send_user(const std::shared_ptr<ucx_connection>& c, detail::user_message kind,
                         std::vector<std::byte> header, std::vector<std::byte> owned,
                         std::span<const std::byte> payload, completion done) {
  send(c, kind == detail::user_message::tensor ? am_tensor : am_control, std::move(header),
       std::move(owned), payload, std::move(done), true);
}

void ucx_core::send_callback(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<send_op> op(static_cast<send_op*>(user_data));
  if (request) ucp_request_free(request);
  ucx_core* core = op->core;
  core->sends_in_flight_.erase(op.get());
  if (!op->done) return;  // completed when the transport shut down
  op_status result;
  if (status != UCS_OK) {
    result = op->conn->error_.value_or(
        transport_error{status == UCS_ERR_CANCELED ? errc::closed : errc::disconnected,
                        "send to " + op->conn->peer().remote.to_string() +
                            " failed: " + status_text(status)});
  }
  if (core->loop_done_) {
    detail::complete(op->done, result);
    return;
  }
  core->deferred_.push_back([done = std::move(op->done), result]() mutable {
    detail::complete(done, result);
  });
}

}  // namespace sailor::comm::ucx_backend
