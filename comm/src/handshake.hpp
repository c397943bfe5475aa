#pragma once
// The transport handshake shared by every backend: the client sends a Hello (magic, version,
// name, zone), the server answers a HelloReply (accepted or refused with a reason).

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "sailor/comm/error.hpp"
#include "sailor/comm/tensor.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::comm::detail {

inline constexpr std::uint64_t hello_magic = 0x5341494c4f520001ull;

struct hello {
  std::uint32_t version = 0;
  std::string name;
  std::string zone;
  std::vector<std::byte> nonce;  ///< empty: the client holds no job token
};

struct hello_reply {
  bool accepted = false;
  std::string reason;
  std::uint32_t version = 0;
  std::string name;
  std::string zone;
  std::vector<std::byte> nonce;  ///< the server's challenge (empty: no job token)
  std::vector<std::byte> proof;  ///< the server's proof of the token
};

std::vector<std::byte> encode_hello(const hello& h);
/// Errors: invalid_message for garbage or a wrong magic.
std::variant<hello, transport_error> decode_hello(std::span<const std::byte> bytes);
std::vector<std::byte> encode_hello_reply(const hello_reply& r);
std::variant<hello_reply, transport_error> decode_hello_reply(std::span<const std::byte> bytes);

/// The server's verdict on a hello: empty if accepted, else the reason to log and send back.
/// Refuses another version, names that are not printable UTF-8 of at most 256 bytes, and a
/// client without a token when this side has one (`token_required`).
std::optional<transport_error> check_hello(const hello& h, bool token_required = false);

/// A tensor's descriptor as the header that travels next to its payload.
std::vector<std::byte> encode_tensor_header(const tensor_descriptor& d);
std::variant<tensor_descriptor, transport_error> decode_tensor_header(
    std::span<const std::byte> bytes);

/// Calls `done` (if set) at most once with `st`.
inline void complete(completion& done, const op_status& st) {
  if (!done) return;
  auto fn = std::move(done);
  done = nullptr;
  fn(st);
}

/// Owns a completion on its way to the progress thread: if it is destroyed before it fired
/// (the task was dropped because the transport shut down), it fires with errc::closed, so
/// every send still completes exactly once.
class completion_guard : non_copyable {
public:
  explicit completion_guard(completion done) : done_(std::move(done)) {}
  ~completion_guard() { complete(done_, transport_error{errc::closed, "transport shut down"}); }
  completion take() {
    auto d = std::move(done_);
    done_ = nullptr;
    return d;
  }

private:
  completion done_;
};

}  // namespace sailor::comm::detail
