#pragma once
// Private to the TCP backend: its connection, core and frame format (see tcp_transport.cpp).
// Files: tcp_transport.cpp (life, progress loop, listen, accept, connect, the connection's
// methods), tcp_frames.cpp (frames out and in, the handshake's frames, failure).

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../connection_base.hpp"
#include "../handshake.hpp"
#include "sailor/comm/tcp.hpp"
#include "sailor/config/log.hpp"
#include "tcp_frame.hpp"
#include "tcp_tls.hpp"

namespace sailor::comm::tcp_backend {

using clock_type = std::chrono::steady_clock;
using detail::from_sockaddr;
using detail::resolve;

class tcp_core;

// A message as a frame on its way out; `payload` points into `owned` when the frame owns it.
struct out_frame : detail::outgoing_message {
  frame_header fh;
  std::size_t written = 0;
  std::size_t total() const { return sizeof(fh) + header.size() + payload.size(); }
};

class tcp_connection final : public detail::core_connection<tcp_core, tcp_connection> {
public:
  using core_connection::core_connection;
  ~tcp_connection() override {
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
  }

  void close() override;

  // ---- progress thread only ----
  int fd_ = -1;
  bool connected_ = false;  // the TCP connect finished (client)
  // TLS (tcp_tls.hpp): the session, whether its handshake is done, and whether the session
  // waits for the socket to be writable.
  SSL* ssl_ = nullptr;
  bool tls_done_ = false;
  bool tls_want_write_ = false;
  /// Frames may move: connected and, under TLS, past the TLS handshake.
  bool stream_ready() const { return connected_ && fd_ >= 0 && (!ssl_ || tls_done_); }
  std::deque<out_frame> out_;
  // Client: the user's frames issued before the handshake ended; they go out right after the
  // proof of the token (or the hello's reply), so that the server reads them once open.
  std::deque<out_frame> early_;
  // receive state
  frame_header in_fh_{};
  std::size_t in_fh_got_ = 0;
  std::vector<std::byte> in_header_;
  std::size_t in_header_got_ = 0;
  bool in_have_header_ = false;
  tensor_descriptor in_desc_;
  std::vector<std::byte> in_control_;
  payload_buffer in_payload_;
  std::byte* in_dest_ = nullptr;
  std::size_t in_payload_got_ = 0;
  bool in_payload_ready_ = false;
};

struct tcp_listener_state {
  int fd = -1;
  accept_handler on_accept;
  refusal_handler on_refused;
  address bound;
};

class tcp_core : public std::enable_shared_from_this<tcp_core> {
public:
  explicit tcp_core(transport_options opts) : opts_(std::move(opts)), log_(log::get("comm")) {}
  ~tcp_core() { stop(); }

  void start();
  void stop();
  void post(std::function<void()> fn);
  bool on_thread() const { return std::this_thread::get_id() == thread_id_; }

  result<std::unique_ptr<listener>> listen(const address& where, accept_handler on_accept,
                                           refusal_handler on_refused);
  result<connection_ptr> connect(const address& to, connection_handlers handlers);
  void close_listener(int fd);
  const transport_options& common_options() const { return opts_; }

  void loop();
  void queue_frame(const std::shared_ptr<tcp_connection>& c, std::uint8_t kind,
                   std::vector<std::byte> header, std::vector<std::byte> owned,
                   std::span<const std::byte> payload, completion done);
  // A user's message (detail::core_connection's sends), as a frame of its kind.
  void send_user(const std::shared_ptr<tcp_connection>& c, detail::user_message kind,
                 std::vector<std::byte> header, std::vector<std::byte> owned,
                 std::span<const std::byte> payload, completion done);
  void flush(const std::shared_ptr<tcp_connection>& c);
  void on_readable(const std::shared_ptr<tcp_connection>& c);
  void on_frame(const std::shared_ptr<tcp_connection>& c);
  bool start_payload(const std::shared_ptr<tcp_connection>& c);
  void fail(const std::shared_ptr<tcp_connection>& c, transport_error err);
  void drop(const std::shared_ptr<tcp_connection>& c, const op_status& st);
  void accept_from(tcp_listener_state& l);
  void make_room(const address& where);
  void shed_connection(int listen_fd);
  template <class F>
  void guarded(const std::shared_ptr<tcp_connection>& c, const char* what, F&& f);
  void run_tasks(std::vector<std::function<void()>>& tasks);
  void check_deadlines(bool& any_connecting);
  void on_hello_frame(const std::shared_ptr<tcp_connection>& c);
  void on_auth_frame(const std::shared_ptr<tcp_connection>& c);
  void on_reply_frame(const std::shared_ptr<tcp_connection>& c);

  void on_socket_event(const std::shared_ptr<tcp_connection>& c, short revents);

  transport_options opts_;
  std::shared_ptr<spdlog::logger> log_;
  tls_context tls_;  // null: plain TCP
  detail::task_queue tasks_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> next_id_{1};
  // progress thread only
  std::map<std::uint64_t, std::shared_ptr<tcp_connection>> conns_;
  std::map<int, std::unique_ptr<tcp_listener_state>> listeners_;
  // Kept open so that, out of descriptors, a pending peer can still be accepted and closed
  // (else the listening socket stays readable and poll() spins).
  int spare_fd_ = -1;
  bool shedding_ = false;  // logged that peers are being shed; reset once under the cap
};

using tcp_listener = detail::core_listener<tcp_core, int>;

inline void set_socket_options(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/// Why a frame header is refused before anything is allocated for its frame (nullopt: it
/// is one this connection expects, within the limits of its kind).
std::optional<std::string> frame_refusal(const tcp_connection& c, const frame_header& fh,
                                         const transport_options& opts);

}  // namespace sailor::comm::tcp_backend
