#pragma once
// The UCX backend. One ucp worker, driven by one progress thread owned by `ucx_core`. UCX
// callbacks only record what happened (into `deferred_`); user callbacks run from the loop,
// outside UCX callbacks, so a user may call anything on the transport from them.
//
// Wire: active messages with the REPLY flag (so the receiver knows the endpoint):
//   am_hello (client->server, Hello), am_hello_reply (server->client, HelloReply),
//   am_auth (client->server, the proof of the job token, comm/auth.hpp),
//   am_control (data = envelope bytes), am_tensor (header = TensorHeader, data = payload).
// Every control and tensor AM carries an 8-byte sequence number first in its header: UCX may
// reorder the first messages of an endpoint (sent before wire-up finished) and receives
// complete out of order (rendezvous vs eager), so each connection delivers them by sequence
// number through `recvs_`. Messages that arrive before the handshake was handled are held.
//
// Nothing but the handshake travels before both sides know each other: a client queues the
// user's sends (`queued_`) until it is open, and with a job token it is open only once the
// server's verdict on its proof came back (hello, reply with the server's proof, the client's
// proof, the server's verdict), so that the server has admitted it before any data arrives.
// What a server holds before the handshake is then only what a peer that does not follow the
// protocol sent, and that is bounded (`max_held_bytes`).
//
// Files: ucx_core.cpp (worker, progress thread, listen, connect), ucx_handshake.cpp (hello and
// its reply, through the shared detail::connection_base), ucx_data.cpp (active messages in
// and out, ordered by sequence number), ucx_connection.cpp (failure, close).

#include <arpa/inet.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include <unistd.h>

#include <ucp/api/ucp.h>

#include "../connection_base.hpp"
#include "../handshake.hpp"
#include "sailor/comm/ucx.hpp"
#include "sailor/config/log.hpp"

namespace sailor::comm::ucx_backend {

using clock_type = std::chrono::steady_clock;
using detail::from_sockaddr;
using detail::resolve;

enum am_id : unsigned { am_hello = 0, am_hello_reply = 1, am_control = 2, am_tensor = 3, am_auth = 4 };
inline constexpr unsigned am_count = 5;
/// Bytes of eager messages a connection may hold before its handshake finished.
inline constexpr std::size_t max_held_bytes = std::size_t{1} << 20;

class ucx_core;
class ucx_connection;

inline std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

inline sailor::error failed(std::string msg) {
  return {error_kind::failed, std::move(msg), "", 0, ""};
}

// One message being received; delivered when it and all before it are complete.
struct pending_recv {
  bool tensor = false;
  bool ready = false;
  std::vector<std::byte> control;
  tensor_descriptor desc;
  payload_buffer payload;
};

struct listener_state {
  std::uint64_t id = 0;
  ucp_listener_h handle = nullptr;
  accept_handler on_accept;
  refusal_handler on_refused;
  address bound;
  ucx_core* core = nullptr;
};

class ucx_connection final : public detail::core_connection<ucx_core, ucx_connection> {
public:
  using core_connection::core_connection;

  void close() override;

  // ---- progress thread only ----
  ucp_ep_h ep_ = nullptr;
  std::uint64_t send_seq_ = 0;     // last sequence number sent
  std::uint64_t deliver_seq_ = 1;  // next sequence number to deliver
  // Arrived before the handshake was handled: replayed through on_data afterwards.
  struct held_message {
    unsigned id;
    std::vector<std::byte> header;
    void* data;  // rndv or persistent descriptor, or points into `copy`
    size_t length;
    int kind;
    std::shared_ptr<std::vector<std::byte>> copy;
  };
  std::vector<held_message> held_;
  std::size_t held_bytes_ = 0;
  // Client: the user's sends before the connection is open, sent in order once it is.
  struct queued_send : detail::outgoing_message {
    unsigned id;
  };
  std::vector<queued_send> queued_;
  bool awaiting_verdict_ = false;  // client: proof sent, the server's verdict not yet in
  std::map<std::uint64_t, std::unique_ptr<pending_recv>> recvs_;
};

// What a send needs until it completes.
struct send_op {
  ucx_core* core;
  std::shared_ptr<ucx_connection> conn;
  completion done;
  std::vector<std::byte> header;
  std::vector<std::byte> owned;  // control bytes (the user's buffer for tensors)
};

struct recv_op {
  std::shared_ptr<ucx_connection> conn;
  pending_recv* slot;
};

class ucx_core : public std::enable_shared_from_this<ucx_core> {
public:
  explicit ucx_core(ucx_options opts) : opts_(std::move(opts)), log_(log::get("comm")) {}
  ~ucx_core() { stop(); }

  std::optional<sailor::error> start();
  void stop();
  void post(std::function<void()> fn);
  bool on_thread() const { return std::this_thread::get_id() == thread_id_; }
  template <class F>
  auto run_sync(F&& fn) -> decltype(fn());

  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused);
  result<connection_ptr> connect(const address& to, connection_handlers handlers);
  void close_listener(std::uint64_t id);
  const transport_options& common_options() const { return opts_.common; }

  // progress thread
  void send(const std::shared_ptr<ucx_connection>& c, unsigned id, std::vector<std::byte> header,
            std::vector<std::byte> owned, std::span<const std::byte> data, completion done,
            bool force_rndv);
  // A user's message (detail::core_connection's sends), as an active message of its
  // kind (by rendezvous when over the threshold).
  void send_user(const std::shared_ptr<ucx_connection>& c, detail::user_message kind,
                 std::vector<std::byte> header, std::vector<std::byte> owned,
                 std::span<const std::byte> payload, completion done);
  void fail(const std::shared_ptr<ucx_connection>& c, transport_error err);
  void close_conn(const std::shared_ptr<ucx_connection>& c, bool force);
  void deliver(const std::shared_ptr<ucx_connection>& c);
  void on_hello(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes);
  void on_hello_reply(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> bytes);
  void on_auth(const std::shared_ptr<ucx_connection>& c, std::span<const std::byte> proof);
  void refuse(const std::shared_ptr<ucx_connection>& c, const detail::hello_reply& reply);
  bool answer(const std::shared_ptr<ucx_connection>& c, const detail::hello_reply& reply);
  // Runs `fn`, a step of the progress loop; an exception it throws is logged, not fatal.
  template <class F>
  void guarded(const char* what, F&& fn);
  enum class data_kind { transient, persistent, rndv };
  // Takes one incoming control or tensor; returns what the AM callback should return.
  ucs_status_t on_data(const std::shared_ptr<ucx_connection>& c, unsigned id,
                       std::span<const std::byte> header, void* data, size_t length,
                       data_kind kind);
  ucs_status_t drop(void* data, data_kind kind);
  // on_data's steps: a message held until the handshake is handled; the checks of an open
  // connection's message (the error to fail it with); the slot it is received into; the copy
  // or rendezvous receive into that slot.
  ucs_status_t hold(const std::shared_ptr<ucx_connection>& c, unsigned id,
                    std::span<const std::byte> header, void* data, size_t length, data_kind kind);
  std::optional<transport_error> check_message(const ucx_connection& c, unsigned id,
                                               std::span<const std::byte> header, size_t length,
                                               std::uint64_t seq) const;
  std::variant<std::unique_ptr<pending_recv>, transport_error> receive_slot(
    const ucx_connection& c, unsigned id, std::span<const std::byte> header, size_t length);
  ucs_status_t receive_into(const std::shared_ptr<ucx_connection>& c, std::uint64_t seq,
                            std::unique_ptr<pending_recv> slot, void* data, size_t length,
                            data_kind kind);
  // Fails `c` with `e` from the loop and drops the message.
  ucs_status_t refuse_message(const std::shared_ptr<ucx_connection>& c, transport_error e,
                              void* data, data_kind kind);
  void replay_held(const std::shared_ptr<ucx_connection>& c);
  // Sends (or, once the connection failed or closed, completes with its error) what the
  // user queued before the connection was open.
  void flush_queued(const std::shared_ptr<ucx_connection>& c);
  // The client is open: tells the user, then sends its queue and takes what was held.
  void open_client(const std::shared_ptr<ucx_connection>& c);
  void release_held(const std::shared_ptr<ucx_connection>& c);

  static ucs_status_t am_callback(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param);
  static void ep_error_callback(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void conn_request_callback(ucp_conn_request_h request, void* arg);
  static void send_callback(void* request, ucs_status_t status, void* user_data);
  static void recv_callback(void* request, ucs_status_t status, size_t length, void* user_data);
  static void close_callback(void* request, ucs_status_t status, void* user_data);

  void loop();
  void check_deadlines();

  ucx_options opts_;
  std::shared_ptr<spdlog::logger> log_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int worker_fd_ = -1;
  detail::task_queue tasks_;
  int epoll_fd_ = -1;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<bool> started_{false};
  std::atomic<std::uint64_t> next_id_{1};

  // progress thread only
  std::vector<std::function<void()>> deferred_;
  std::unordered_map<ucp_ep_h, std::shared_ptr<ucx_connection>> by_ep_;
  std::map<std::uint64_t, std::unique_ptr<listener_state>> listeners_;
  int closing_ = 0;
  // Sends UCX holds: a transport shut down completes each of them once, whether UCX ends
  // it in time or not (after the loop, a late one is completed where it ends).
  std::unordered_set<send_op*> sends_in_flight_;
  bool loop_done_ = false;
  bool on_callback_ = false;  // inside am_callback (vs. a deferred call)
  struct am_arg {
    ucx_core* core;
    unsigned id;
  };
  am_arg am_args_[am_count];
};

template <class F>
void ucx_core::guarded(const char* what, F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    log_->error("[ucx] {} threw: {}", what, e.what());
  } catch (...) {
    log_->error("[ucx] {} threw", what);
  }
}

template <class F>
auto ucx_core::run_sync(F&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  if (on_thread()) return fn();
  auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
  auto future = task->get_future();
  if (!tasks_.post([task] { (*task)(); })) return failed("transport is shut down");
  return future.get();
}

}  // namespace sailor::comm::ucx_backend
