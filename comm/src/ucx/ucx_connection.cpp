// The UCX backend: a connection's failure and close (see ucx_core.hpp); its sends are
// detail::core_connection's.

#include "ucx_core.hpp"

#include <spdlog/spdlog.h>

#include "handshake.hpp"

namespace sailor::comm::ucx_backend {

// ---------------------------------------------------------------- failure and close

void ucx_core::ep_error_callback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* raw = static_cast<ucx_connection*>(arg);
  auto core = raw->core_.lock();
  if (!core) return;
  auto c = raw->shared_from_this();
  core->deferred_.push_back([core, c, status] {
    errc code = errc::disconnected;
    std::string what = c->state_ == connection_state::connecting && !c->server_
                           ? "cannot reach "
                           : "peer failed: ";
    core->fail(c, {code, what + c->peer().remote.to_string() + " (" + status_text(status) + ")"});
  });
}

void ucx_core::fail(const std::shared_ptr<ucx_connection>& c, transport_error err) {
  auto s = c->state_.load();
  if (s == connection_state::closed || s == connection_state::failed) {
    if (c->ep_) close_conn(c, true);
    return;
  }
  auto on_error = detail::mark_failed(*c, err, *log_, "ucx");
  c->recvs_.clear();
  release_held(c);
  flush_queued(c);  // completes the user's queued sends with the error
  close_conn(c, true);
  if (on_error) on_error(err);
}

void ucx_core::close_conn(const std::shared_ptr<ucx_connection>& c, bool force) {
  if (!c->ep_) return;
  ucp_ep_h ep = c->ep_;
  c->ep_ = nullptr;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                   UCP_OP_ATTR_FIELD_USER_DATA;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  auto* keep = new std::shared_ptr<ucx_connection>(c);
  p.cb.send = &ucx_core::close_callback;
  p.user_data = keep;
  ++closing_;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) close_callback(nullptr, UCS_OK, keep);
}

void ucx_core::close_callback(void* request, ucs_status_t, void* user_data) {
  std::unique_ptr<std::shared_ptr<ucx_connection>> keep(
      static_cast<std::shared_ptr<ucx_connection>*>(user_data));
  if (request) ucp_request_free(request);
  auto core = (*keep)->core_.lock();
  if (!core) return;
  --core->closing_;
  // The ep is gone: forget it (late callbacks of this ep find nothing).
  for (auto it = core->by_ep_.begin(); it != core->by_ep_.end(); ++it) {
    if (it->second == *keep) {
      core->by_ep_.erase(it);
      break;
    }
  }
}

// ---------------------------------------------------------------- close from this side

void ucx_connection::close() {
  detail::post_close(core_, shared_from_this(), [self = shared_from_this()](const auto& core) {
    self->recvs_.clear();
    core->release_held(self);
    core->flush_queued(self);  // completes the user's queued sends: closed
    self->handlers_ = {};
    core->close_conn(self, false);
  });
}

}  // namespace sailor::comm::ucx_backend
