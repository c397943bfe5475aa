#pragma once
// TLS for the TCP backend (OpenSSL): the transport's context, each connection's session and
// the byte stream under the frames, plain or encrypted. A connection with a session runs the
// TLS handshake first (driven by the progress loop on readable/writable), then the frames
// travel through SSL_read/SSL_write exactly as they do through recv/sendmsg without it.

#include <sys/uio.h>

#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "sailor/comm/transport.hpp"

namespace sailor::comm::tcp_backend {

class tcp_connection;

struct tls_context_free {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using tls_context = std::unique_ptr<SSL_CTX, tls_context_free>;

/// The context for `files` (TLS 1.3, mutual: a peer without a certificate signed by the CA
/// is refused in the TLS handshake). Errors name the file that could not be used.
result<tls_context> make_tls_context(const transport_options::tls_files& files);

/// Gives `c` (its socket open) a session on `ctx`, as client or server.
void start_tls(tcp_connection& c, SSL_CTX* ctx);

/// Advances the TLS handshake of `c`. Returns true once it is done; false while it waits for
/// the socket (`c.tls_want_write_` says for which) or when it failed (`error` set).
bool advance_tls(tcp_connection& c, std::string& error);

/// What one read or write of the stream did.
struct stream_io {
  long bytes = 0;      ///< moved (> 0), or 0
  bool closed = false; ///< the peer closed the stream
  bool blocked = false;///< nothing moved now: wait for the socket
  std::string error;   ///< failed (not empty)
};

/// Reads up to `want` bytes into `dest` (plain recv, or SSL_read once the handshake is done).
stream_io stream_read(tcp_connection& c, void* dest, std::size_t want);
/// Writes from `iov` (sendmsg, or SSL_write of the first part with bytes left).
stream_io stream_write(tcp_connection& c, const iovec* iov, int n);
/// Whether decrypted bytes wait inside the session (the socket will not say so).
bool tls_pending(const tcp_connection& c);

}  // namespace sailor::comm::tcp_backend
