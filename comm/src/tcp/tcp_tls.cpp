// TLS for the TCP backend (see tcp_tls.hpp).

#include "tcp_tls.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <openssl/err.h>

#include "tcp_core.hpp"

namespace sailor::comm::tcp_backend {

namespace {

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

sailor::error tls_error(const std::string& field, const std::string& what) {
  return {error_kind::invalid_input, what + ": " + openssl_errors(), "", 0, field};
}

}  // namespace

result<tls_context> make_tls_context(const transport_options::tls_files& files) {
  if (files.cert.empty() || files.key.empty() || files.ca.empty())
    return sailor::error::invalid_input(
      files.cert.empty()  ? "tls cert"
      : files.key.empty() ? "tls key"
                          : "tls ca",
      "TLS needs a certificate, its key and the CA that signed the peers' "
      "(all three)");
  ERR_clear_error();
  tls_context ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) return tls_error("tls", "cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.cert.c_str()) != 1)
    return tls_error("tls cert", "cannot use the certificate " + files.cert);
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return tls_error("tls key", "cannot use the key " + files.key);
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return tls_error("tls key", "the key " + files.key + " is not the certificate's");
  if (SSL_CTX_load_verify_locations(ctx.get(), files.ca.c_str(), nullptr) != 1)
    return tls_error("tls ca", "cannot use the CA " + files.ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Nodes connect by address and rejoin: no session tickets to keep or resume.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  return ctx;
}

void start_tls(tcp_connection& c, SSL_CTX* ctx) {
  c.ssl_ = SSL_new(ctx);
  SSL_set_fd(c.ssl_, c.fd_);
  if (c.server_)
    SSL_set_accept_state(c.ssl_);
  else
    SSL_set_connect_state(c.ssl_);
}

bool advance_tls(tcp_connection& c, std::string& error) {
  ERR_clear_error();
  int rc = SSL_do_handshake(c.ssl_);
  c.tls_want_write_ = false;
  if (rc == 1) {
    c.tls_done_ = true;
    return true;
  }
  int e = SSL_get_error(c.ssl_, rc);
  if (e == SSL_ERROR_WANT_READ) return false;
  if (e == SSL_ERROR_WANT_WRITE) {
    c.tls_want_write_ = true;
    return false;
  }
  long verify = SSL_get_verify_result(c.ssl_);
  error = "TLS handshake with " + c.peer().remote.to_string() + " failed: " +
          (verify != X509_V_OK ? std::string("certificate: ") +
                                     X509_verify_cert_error_string(verify)
                               : openssl_errors());
  return false;
}

namespace {

stream_io from_ssl(tcp_connection& c, int rc, const char* what) {
  stream_io io;
  if (rc > 0) {
    io.bytes = rc;
    return io;
  }
  int e = SSL_get_error(c.ssl_, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    c.tls_want_write_ = e == SSL_ERROR_WANT_WRITE;
    io.blocked = true;
  } else if (e == SSL_ERROR_ZERO_RETURN) {
    io.closed = true;
  } else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    io.closed = true;  // the peer went away without a TLS close
  } else {
    io.error = std::string(what) + " failed: " + openssl_errors();
  }
  return io;
}

// The same for a plain socket call that failed: blocked (wait for the socket), or an error
// that names what failed.
stream_io from_errno(const char* what) {
  stream_io io;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    io.blocked = true;
  else
    io.error = std::string(what) + " failed: " + std::strerror(errno);
  return io;
}

}  // namespace

stream_io stream_read(tcp_connection& c, void* dest, std::size_t want) {
  if (c.ssl_) {
    ERR_clear_error();
    int chunk = static_cast<int>(std::min<std::size_t>(want, 1 << 30));
    return from_ssl(c, SSL_read(c.ssl_, dest, chunk), "TLS receive");
  }
  ssize_t r = ::recv(c.fd_, dest, want, 0);
  if (r < 0) return from_errno("receive");
  stream_io io;
  io.bytes = r;
  io.closed = r == 0;
  return io;
}

stream_io stream_write(tcp_connection& c, const iovec* iov, int n) {
  if (c.ssl_) {
    // One part at a time: a retry after WANT_WRITE repeats the same bytes, as TLS asks.
    for (int i = 0; i < n; ++i) {
      if (iov[i].iov_len == 0) continue;
      ERR_clear_error();
      int chunk = static_cast<int>(std::min<std::size_t>(iov[i].iov_len, 1 << 30));
      return from_ssl(c, SSL_write(c.ssl_, iov[i].iov_base, chunk), "TLS send");
    }
    return {};
  }
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(n);
  ssize_t w = n == 0 ? 0 : ::sendmsg(c.fd_, &msg, MSG_NOSIGNAL);
  if (w < 0) return from_errno("send");
  stream_io io;
  io.bytes = w;
  return io;
}

bool tls_pending(const tcp_connection& c) { return c.ssl_ && SSL_pending(c.ssl_) > 0; }

}  // namespace sailor::comm::tcp_backend
